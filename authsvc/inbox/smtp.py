"""The test-inbox SMTP sink (aiosmtpd): accepts mail for one domain and stores it."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections import defaultdict
from typing import Any

import psycopg
from aiosmtpd.controller import Controller
from psycopg_pool import ConnectionPool

from authsvc.inbox.faults import prune_faults, take_fault
from authsvc.inbox.messages import (
    DEFAULT_MAX_PER_SCOPE,
    fold_usage,
    inbox_usage,
    insert_content,
    insert_message,
    prune_messages,
    stored_bytes,
)
from authsvc.inbox.parsing import parse_message
from authsvc.inbox.scopes import BadScope, scope_of
from authsvc.observability.logs import log_event

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 10 * 1024 * 1024
# RFC 5321 §4.5.3.1.8: a server must accept at least 100 recipients, and may
# refuse more with 452 (the client sends the rest in another transaction).
MAX_RECIPIENTS = 100
PRUNE_INTERVAL_SECONDS = 600
# The whole inbox's bytes (AUTHSVC_TEST_INBOX_MAX_BYTES): raw and parsed, each message once.
DEFAULT_MAX_TOTAL_BYTES = 256 * 1024 * 1024
# How often the usage deltas are summed into one row (reading them stays cheap).
USAGE_FOLD_SECONDS = 10.0
FULL_REPLY = "452 4.3.1 the test inbox is full; try again later"


class Refused(Exception):
    """A message the sink will not store; `reply` is the SMTP answer."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.reply = reply


def _declared_size(mail_options: list[str]) -> int:
    """The SIZE= a client declared at MAIL FROM (RFC 1870), or 0."""
    for option in mail_options:
        name, _, value = option.partition("=")
        if name.upper() == "SIZE" and value.isdigit():
            return int(value)
    return 0


class InboxHandler:
    """aiosmtpd handler: checks recipients at RCPT, stores the message at DATA."""

    def __init__(
        self, pool: ConnectionPool, domain: str, *, max_per_scope: int = DEFAULT_MAX_PER_SCOPE,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    ) -> None:
        self.pool = pool
        self.domain = domain.lower()
        self.max_per_scope = max_per_scope
        self.max_total_bytes = max_total_bytes
        self._in_flight = 0
        self._idle = threading.Condition()

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            reply = f"452 4.5.3 too many recipients (at most {MAX_RECIPIENTS} per message)"
            log_event(log, "inbox_recipient_refused", recipient=address, reply=reply)
            return reply
        try:
            scope = scope_of(address, self.domain)
        except BadScope as exc:
            reply = f"553 5.1.3 {exc}"
        else:
            fault = None if scope is None else await self._fault_reply(scope)
            if scope is None:
                reply = f"550 5.1.1 this test inbox only accepts mail for @{self.domain}"
            elif fault is not None:
                log_event(log, "inbox_fault_replied", scope=scope, reply=fault)
                return fault
            else:
                # Once per transaction: a full inbox refuses before the data is sent.
                budget = None if envelope.rcpt_tos else await self._budget_reply(envelope)
                if budget is None:
                    envelope.rcpt_tos.append(address)
                    return "250 OK"
                reply = budget
        log_event(log, "inbox_recipient_refused", recipient=address, reply=reply)
        return reply

    async def _fault_reply(self, scope: str) -> str | None:
        """The reply a fault set on `scope` asks for (using it up), or None to go on."""
        def take() -> str | None:
            with self.pool.connection() as conn:
                return take_fault(conn, scope)

        try:
            return await asyncio.get_running_loop().run_in_executor(None, take)
        except psycopg.Error:
            return None  # DATA answers 451 if the database is really gone

    async def _budget_reply(self, envelope: Any) -> str | None:
        """452 when the inbox is full (or the declared SIZE would not fit now), 552 when it
        never would; None to go on. An unreadable figure lets DATA decide (451)."""
        declared = _declared_size(envelope.mail_options)
        if declared > self.max_total_bytes:
            return f"552 5.3.4 larger than the test inbox's {self.max_total_bytes} bytes"
        try:
            used = await asyncio.get_running_loop().run_in_executor(None, self._usage)
        except psycopg.Error:
            return None
        if used >= self.max_total_bytes or used + declared > self.max_total_bytes:
            return FULL_REPLY
        return None

    def _usage(self) -> int:
        with self.pool.connection() as conn:
            return inbox_usage(conn)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._idle:
            self._in_flight += 1
        try:
            loop = asyncio.get_running_loop()
            raw = bytes(envelope.original_content or b"")
            ids = await loop.run_in_executor(
                None, self.store, raw, list(envelope.rcpt_tos), envelope.mail_from
            )
        except Refused as refused:
            log_event(log, "inbox_message_refused", reply=refused.reply)
            return refused.reply
        except psycopg.Error as exc:
            log_event(log, "inbox_store_failed", logging.WARNING, error=str(exc))
            return "451 4.3.0 the message could not be stored; try again later"
        finally:
            with self._idle:
                self._in_flight -= 1
                self._idle.notify_all()
        return f"250 OK stored as {','.join(map(str, ids))}"

    def store(self, raw: bytes, recipients: list[str], envelope_sender: str | None) -> list[int]:
        """Parse once, store the message once and list it once per scope, in one
        transaction; returns the new ids. Refused when it does not fit the byte budget."""
        parsed = parse_message(raw)
        needed = stored_bytes(parsed, raw)
        if needed > self.max_total_bytes:
            raise Refused(f"552 5.3.4 stored, this message would take {needed} bytes,"
                          f" more than the test inbox's {self.max_total_bytes}")
        by_scope: dict[str, list[str]] = defaultdict(list)
        for address in recipients:
            scope = scope_of(address, self.domain)
            if scope is not None:  # RCPT already refused everything else
                by_scope[scope].append(address)
        with self.pool.connection() as conn, conn.transaction():
            # Stores running at the same moment may each pass this check: the
            # budget can be exceeded by what the sink's connections store at once.
            if inbox_usage(conn) + needed > self.max_total_bytes:
                raise Refused(FULL_REPLY)
            content_id = insert_content(conn, parsed, raw, envelope_sender)
            ids = [
                insert_message(conn, scope, rcpts, content_id, keep=self.max_per_scope)
                for scope, rcpts in by_scope.items()
            ]
        for (scope, _), inbox_id in zip(by_scope.items(), ids, strict=True):
            log_event(
                log, "inbox_message_stored", scope=scope, inbox_id=inbox_id,
                message_id=parsed.message_id, size=len(raw),
            )
        # No pruning here: the messages are committed, so nothing after this
        # may turn the reply into a 451 (the sender would re-send a duplicate).
        return ids

    def fold(self) -> None:
        """Sum the usage deltas into one row; a failure is logged, never raised."""
        try:
            with self.pool.connection() as conn:
                fold_usage(conn)
        except Exception as exc:  # the next round retries
            log_event(log, "inbox_usage_fold_failed", logging.WARNING, error=str(exc))

    def prune(self) -> None:
        """Delete messages past retention; a failure is logged, never raised."""
        try:
            with self.pool.connection() as conn:
                pruned = prune_messages(conn)
                prune_faults(conn)
        except Exception as exc:  # the next round retries; the sink goes on regardless
            log_event(log, "inbox_prune_failed", logging.WARNING, error=str(exc))
            return
        if pruned:
            log_event(log, "inbox_pruned", count=pruned)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no message is being stored; False if still busy after `timeout`."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout=timeout)


def _check_can_listen(host: str, port: int) -> None:
    """Bind every address `host` resolves to, as the server will, and close; OSError if taken."""
    for family, kind, proto, _name, address in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    ):
        with socket.socket(family, kind, proto) as probe:
            # As asyncio's server does: a port in TIME_WAIT is free, a listening one is not.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)


class InboxSink:
    """The SMTP sink on host:port, running in a background thread."""

    def __init__(
        self, pool: ConnectionPool, domain: str, *, host: str = "127.0.0.1", port: int = 2525,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        prune_interval: float = PRUNE_INTERVAL_SECONDS,
        max_per_scope: int = DEFAULT_MAX_PER_SCOPE,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
    ) -> None:
        self.handler = InboxHandler(
            pool, domain, max_per_scope=max_per_scope, max_total_bytes=max_total_bytes
        )
        self.host, self.port = host, port
        self.prune_interval = prune_interval
        self._stopping = threading.Event()
        self._pruner: threading.Thread | None = None
        self._controller = Controller(
            self.handler, hostname=host, port=port, server_hostname="authsvc-test-inbox",
            enable_SMTPUTF8=True, data_size_limit=max_message_bytes, ready_timeout=10,
        )

    def start(self) -> None:
        """Listen; raises OSError at once when the port is taken."""
        # aiosmtpd reports a failed bind only after its ready timeout (10 s).
        _check_can_listen(self.host, self.port)
        self._controller.start()
        self.handler.prune()  # at start, whatever the host's uptime
        self._pruner = threading.Thread(
            target=self._prune_periodically, name="inbox-pruner", daemon=True
        )
        self._pruner.start()
        log_event(log, "inbox_listening", host=self.host, port=self.port)

    def _prune_periodically(self) -> None:
        # Off the DATA path: a slow or failing prune never delays or changes a reply.
        next_prune = time.monotonic() + self.prune_interval
        while not self._stopping.wait(min(USAGE_FOLD_SECONDS, self.prune_interval)):
            if time.monotonic() >= next_prune:
                self.handler.prune()  # folds too
                next_prune = time.monotonic() + self.prune_interval
            else:
                self.handler.fold()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The sink's event loop (the async HTTP front runs on it too)."""
        return self._controller.loop

    def stop(self, grace_seconds: float = 5.0) -> None:
        """Stop accepting, let messages being stored finish (bounded), then close."""
        self._stopping.set()
        server = self._controller.server
        if server is not None:
            self._controller.loop.call_soon_threadsafe(server.close)
        self.handler.wait_idle(grace_seconds)
        self._controller.stop()
        if self._pruner is not None:
            self._pruner.join(grace_seconds)
        log_event(log, "inbox_stopped", host=self.host, port=self.port)
