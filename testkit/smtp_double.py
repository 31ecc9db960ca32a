"""A controllable SMTP server (aiosmtpd, in a thread, on a free port) for tests.

It records what it accepted and can be told, per message or by default, to
answer 4xx or 5xx, to stall, or to drop the connection before or after DATA.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import ssl
import threading
import time
from collections import deque
from dataclasses import dataclass
from email.message import EmailMessage
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from testkit.waiting import free_port

MODES = (
    "accept",              # 250 after `delay_seconds`
    "tempfail",            # 451 to RCPT
    "reject",              # 550 to RCPT: rejected recipient
    "reject_data",         # 554 after the final dot
    "drop_before_data",    # close the connection at RCPT
    "stall_before_data",   # hang at RCPT until released
    "accept_then_drop",    # record the message, then close without a reply
    "stall_after_accept",  # record the message, then hang until released
)


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    received_at: float  # time.time()
    peer: str  # the client's host:port, one per connection

    @cached_property
    def message(self) -> EmailMessage:
        # Parsed on first use, not in the server's event loop: a load test
        # receiving hundreds of messages a second would otherwise measure
        # this parser as much as the worker.
        return email.message_from_bytes(self.data, policy=email.policy.default)  # type: ignore[return-value]

    @property
    def message_id(self) -> str:
        return str(self.message["Message-ID"])

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    def header(self, name: str) -> str | None:
        value = self.message[name]
        return None if value is None else str(value)

    @property
    def text(self) -> str:
        part = self.message.get_body(preferencelist=("plain",))
        assert part is not None
        return str(part.get_content())  # type: ignore[attr-defined]

    @property
    def html(self) -> str:
        part = self.message.get_body(preferencelist=("html",))
        assert part is not None
        return str(part.get_content())  # type: ignore[attr-defined]

    @property
    def link(self) -> str:
        """The first link with a token in the plain-text part."""
        return next(word for word in self.text.split() if "token=" in word)


class SmtpDouble:
    """Start with `with SmtpDouble() as smtp:`; point AUTHSVC_SMTP_URL at `smtp.url`."""

    def __init__(
        self,
        mode: str = "accept",
        delay_seconds: float = 0.0,
        *,
        security: str = "plain",  # "plain" | "starttls" | "ssl"
        certificate: tuple[Path, Path] | None = None,  # (cert, key) PEM files
        credentials: tuple[str, str] | None = None,
        smtputf8: bool = False,  # advertise SMTPUTF8 (RFC 6531): UTF-8 addresses and headers
    ) -> None:
        self.mode = mode
        self.security = security
        self.credentials = credentials
        self.delay_seconds = delay_seconds
        self.release = threading.Event()  # ends every stall
        self.messages: list[Received] = []
        self.attempts = 0  # RCPT commands seen, whatever the answer
        self._script: deque[str] = deque()
        self._transports: list[Any] = []
        self._changed = threading.Condition()
        self.port = free_port()
        options: dict[str, Any] = {"enable_SMTPUTF8": smtputf8}
        if security != "plain":
            assert certificate is not None, "TLS needs a certificate"
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*certificate)
            options["tls_context" if security == "starttls" else "ssl_context"] = context
        if credentials:
            options["authenticator"] = self._authenticate
            # Implicit TLS is invisible to aiosmtpd's own check; RCPT enforces AUTH below.
            options["auth_require_tls"] = security == "starttls"
        self._controller = Controller(
            _Handler(self), hostname="127.0.0.1", port=self.port, **options
        )

    @property
    def url(self) -> str:
        scheme = {"plain": "smtp", "starttls": "smtp+starttls", "ssl": "smtps"}[self.security]
        auth = ""
        if self.credentials:
            auth = f"{quote(self.credentials[0], safe='')}:{quote(self.credentials[1], safe='')}@"
        return f"{scheme}://{auth}127.0.0.1:{self.port}"

    def _authenticate(self, _server: Any, _session: Any, _envelope: Any, _mechanism: str,
                      data: Any) -> AuthResult:
        login, password = data.login.decode(), data.password.decode()
        # handled=False: let aiosmtpd send the 535 itself.
        return AuthResult(success=(login, password) == self.credentials, handled=False)

    def script(self, *modes: str) -> None:
        """Answer the next messages with these modes, in order, then with `mode`."""
        for mode in modes:
            assert mode in MODES, mode
        self._script.extend(modes)

    def next_mode(self) -> str:
        return self._script.popleft() if self._script else self.mode

    def record(self, envelope: Any, peer: object = None) -> None:
        data = envelope.original_content or envelope.content
        received = Received(
            envelope.mail_from, list(envelope.rcpt_tos), data, time.time(), str(peer)
        )
        with self._changed:
            self.messages.append(received)
            self._changed.notify_all()

    def note_attempt(self) -> None:
        with self._changed:
            self.attempts += 1
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Block until at least `count` messages were accepted; fail the test otherwise."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.messages) >= count, timeout):
                got = len(self.messages)
                raise AssertionError(f"expected {count} message(s) in {timeout}s, got {got}")
            return list(self.messages)

    def wait_for_attempts(self, count: int, timeout: float = 10.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.attempts >= count, timeout):
                got = self.attempts
                raise AssertionError(f"expected {count} attempt(s) in {timeout}s, got {got}")

    def remember(self, transport: Any) -> None:
        self._transports.append(transport)

    def drop_connections(self) -> None:
        """Close every connection that delivered something, as servers do with idle ones."""
        transports, self._transports = self._transports, []
        done = threading.Event()

        def close_all() -> None:
            for transport in transports:
                transport.close()
            done.set()

        self._controller.loop.call_soon_threadsafe(close_all)
        assert done.wait(5)

    def __enter__(self) -> SmtpDouble:
        self._controller.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()
        self._controller.stop()


class _Handler:
    def __init__(self, double: SmtpDouble) -> None:
        self.double = double

    async def _stall(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.double.release.wait, 60)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, _options: Any
    ) -> str:
        self.double.note_attempt()
        if self.double.credentials and not session.authenticated:
            return "530 5.7.0 authentication required"
        if self.double.security == "starttls" and session.ssl is None:
            return "530 5.7.0 must issue STARTTLS first"
        mode = self.double.next_mode()
        envelope.authsvc_mode = mode
        if mode == "tempfail":
            return "451 4.3.0 try again later"
        if mode == "reject":
            return "550 5.1.1 no such user here"
        if mode == "drop_before_data":
            server.transport.close()
            return "421 closing"
        if mode == "stall_before_data":
            await self._stall()
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        mode = getattr(envelope, "authsvc_mode", self.double.mode)
        if mode == "reject_data":
            return "554 5.6.0 message refused"
        self.double.record(envelope, session.peer)
        self.double.remember(server.transport)
        if mode == "accept_then_drop":
            server.transport.close()
            return "250 OK (never seen)"
        if mode == "stall_after_accept":
            await self._stall()
        elif self.double.delay_seconds:
            await asyncio.sleep(self.double.delay_seconds)
        return "250 OK queued"
