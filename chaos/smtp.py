"""An SMTP server that misbehaves on purpose and remembers what it accepted."""

from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass
from email import message_from_bytes
from email.policy import default as default_policy
from typing import Any

from aiosmtpd.controller import Controller

from testkit.waiting import free_port

_LINK = re.compile(r"https?://[^/\s]+(/[^?\s]*)\?token=([A-Za-z0-9_.\-]+)")


@dataclass(frozen=True)
class Receipt:
    """One message the server took responsibility for."""

    message_id: str
    recipient: str
    token: str | None
    received_at: float
    link_path: str | None = None  # the path of the link carrying `token`


@dataclass(frozen=True)
class FaultRates:
    """Per-transaction probabilities of each fault."""

    tempfail: float = 0.05  # 451 at RCPT: nothing accepted, try later
    drop_before_data: float = 0.04  # connection closed at RCPT
    drop_after_accept: float = 0.02  # message kept, connection closed instead of 250


def _link(data: bytes) -> tuple[str | None, str | None]:
    """(path, token) of the first link with a token in the text part, or (None, None)."""
    message = message_from_bytes(data, policy=default_policy)
    body = message.get_body(preferencelist=("plain",))
    text = body.get_content() if body is not None else ""  # type: ignore[union-attr]
    match = _LINK.search(text)
    return (match.group(1), match.group(2)) if match else (None, None)


class FaultySmtp:
    """aiosmtpd on a free port in a thread of this process."""

    def __init__(self, rates: FaultRates, seed: int) -> None:
        self.rates = rates
        self.port = free_port()
        self.receipts: list[Receipt] = []
        self.faults = {"tempfail": 0, "drop_before_data": 0, "drop_after_accept": 0}
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._controller = Controller(_Handler(self), hostname="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()

    def roll(self, fault: str) -> bool:
        """Whether this transaction suffers `fault` (counted when it does)."""
        with self._lock:
            hit = self._random.random() < getattr(self.rates, fault)
            if hit:
                self.faults[fault] += 1
            return hit

    def accept(self, envelope: Any) -> None:
        data: bytes = envelope.original_content or envelope.content
        message = message_from_bytes(data, policy=default_policy)
        path, token = _link(data)
        receipt = Receipt(
            message_id=str(message["Message-ID"] or ""),
            recipient=",".join(envelope.rcpt_tos),
            token=token,
            received_at=time.time(),
            link_path=path,
        )
        with self._lock:
            self.receipts.append(receipt)

    def snapshot(self) -> list[Receipt]:
        with self._lock:
            return list(self.receipts)


class _Handler:
    def __init__(self, server: FaultySmtp) -> None:
        self.server = server

    async def handle_RCPT(self, smtp: Any, session: Any, envelope: Any, address: str,
                          options: list[str]) -> str:
        if self.server.roll("drop_before_data"):
            smtp.transport.close()
            return "421 4.4.2 connection dropped (chaos)"
        if self.server.roll("tempfail"):
            return "451 4.3.0 try again later (chaos)"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, smtp: Any, session: Any, envelope: Any) -> str:
        # Once the message is kept the server is responsible for it; dropping
        # the connection now is the crash-after-accept window.
        self.server.accept(envelope)
        if self.server.roll("drop_after_accept"):
            smtp.transport.close()
            return "421 4.4.2 connection dropped after accepting (chaos)"
        return "250 2.0.0 queued"
