"""A local mail provider in Resend's API shape, for tests and the chaos harness.

Not part of authsvc's runtime (the wheel ships `authsvc` and `worker` only).
It answers `POST /emails` as Resend documents it: a bearer key, a JSON body of
the documented fields (anything else is a 422), `{"id": …}` on success, and
`Idempotency-Key`: a key seen in the last 24 hours gets the first answer
again without a second delivery; the same key with another body gets 409
`invalid_idempotent_request`, and while the first request with a key is
still being answered, 409 `concurrent_idempotent_requests`.

It can be told to misbehave, by script (`fail_next`, `stall_next`,
`drop_next`) or at random rates (`FaultRates`): answer 429 with
`Retry-After`, answer 500, stall after accepting (the caller times out and
retries with the same key), or drop the connection after accepting. An
`on_accept` hook runs after a message is stored and before it is answered:
the chaos harness kills the sending worker there.
"""

from __future__ import annotations

import json
import random
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEDUP_SECONDS = 24 * 3600.0
DOCUMENTED_FIELDS = frozenset({
    "from", "to", "subject", "bcc", "cc", "reply_to", "html", "text", "headers",
    "attachments", "tags", "scheduled_at", "template", "topic_id",
})
REQUIRED_FIELDS = ("from", "to", "subject")
# Resend's error names by status, for injected failures.
ERROR_NAMES = {400: "validation_error", 401: "missing_api_key", 403: "invalid_api_key",
               404: "not_found", 408: "request_timeout", 422: "validation_error",
               429: "rate_limit_exceeded"}
_TOKEN = re.compile(r"[?&]token=([A-Za-z0-9_.\-]+)")


@dataclass(frozen=True)
class Delivered:
    """One message the provider accepted (after deduplication: one per key)."""

    id: str
    idempotency_key: str | None
    public_job_id: str | None  # from the X-Authsvc-Job header
    to: tuple[str, ...]
    subject: str
    text: str
    html: str
    body: dict[str, Any]
    accepted_at: float

    @property
    def token(self) -> str | None:
        match = _TOKEN.search(self.text)
        return match.group(1) if match else None


@dataclass(frozen=True)
class Fault:
    """What to do with one request instead of answering it plainly."""

    kind: str  # "fail" (status, retry_after; nothing accepted) | "stall" | "drop"
    status: int = 500
    retry_after: str | None = None
    stall_seconds: float = 0.0


@dataclass(frozen=True)
class FaultRates:
    """Per-request probabilities, for chaos."""

    rate_limited: float = 0.0  # 429 with Retry-After, nothing accepted
    server_error: float = 0.0  # 500, nothing accepted
    stall_after_accept: float = 0.0  # accepted, then no answer for `stall_seconds`
    drop_after_accept: float = 0.0  # accepted, then the connection closed unanswered
    retry_after: str = "1"
    stall_seconds: float = 5.0


@dataclass
class _Remembered:
    body_hash: str
    status: int
    answer: dict[str, Any]
    at: float
    done: threading.Event = field(default_factory=threading.Event)


class LocalResend:
    """Start with `with LocalResend() as provider:`; point the worker at `provider.mail_url`."""

    def __init__(self, api_key: str = "re_local_test_key", *, rates: FaultRates | None = None,
                 seed: int = 0, clock: Callable[[], float] = time.time,
                 on_accept: Callable[[tuple[str, int], Delivered], None] | None = None) -> None:
        self.api_key = api_key
        self.rates = rates or FaultRates()
        self.clock = clock
        self.on_accept = on_accept
        self.delivered: list[Delivered] = []
        self.requests: list[dict[str, Any]] = []  # every request: headers and body, in order
        self.replays = 0  # requests answered from the idempotency store
        self.faults: dict[str, int] = {"rate_limited": 0, "server_error": 0,
                                       "stall_after_accept": 0, "drop_after_accept": 0}
        self._scripted: list[Fault] = []
        self._keys: dict[str, _Remembered] = {}
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="local-resend",
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def mail_url(self) -> str:
        return f"resend+http://{self.api_key}@127.0.0.1:{self.port}"

    def start(self) -> LocalResend:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LocalResend:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # Scripted faults, applied to the next requests in order.
    def fail_next(self, status: int, *, retry_after: str | None = None, times: int = 1) -> None:
        with self._lock:
            self._scripted += [Fault("fail", status=status, retry_after=retry_after)] * times

    def stall_next(self, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._scripted += [Fault("stall", stall_seconds=seconds)] * times

    def drop_next(self, times: int = 1) -> None:
        with self._lock:
            self._scripted += [Fault("drop")] * times

    def idle(self) -> bool:
        """No request is still being answered (stalled) under its key."""
        with self._lock:
            return all(r.done.is_set() for r in self._keys.values())

    def snapshot(self) -> list[Delivered]:
        with self._lock:
            return list(self.delivered)

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if self._scripted:
                return self._scripted.pop(0)
            r, roll = self.rates, self._random.random()
            for name, rate, fault in (
                ("rate_limited", r.rate_limited, Fault("fail", 429, r.retry_after)),
                ("server_error", r.server_error, Fault("fail", 500)),
                ("stall_after_accept", r.stall_after_accept,
                 Fault("stall", stall_seconds=r.stall_seconds)),
                ("drop_after_accept", r.drop_after_accept, Fault("drop")),
            ):
                if roll < rate:
                    self.faults[name] += 1
                    return fault
                roll -= rate
        return None

    def handle(self, headers: dict[str, str], raw: bytes,
               peer: tuple[str, int]) -> tuple[int, dict[str, Any], dict[str, str], Fault | None]:
        """(status, JSON answer, extra headers, fault to act on after storing) for one POST."""
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, _error(401, "invalid_api_key", "API key is invalid"), {}, None
        try:
            body = json.loads(raw)
        except ValueError:
            return 422, _error(422, "validation_error", "body is not JSON"), {}, None
        with self._lock:
            self.requests.append({"headers": headers, "body": body, "peer": peer})
        problem = _validate(body)
        if problem:
            return 422, _error(422, "validation_error", problem), {}, None
        fault = self._next_fault()
        if fault is not None and fault.kind == "fail":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            name = ERROR_NAMES.get(fault.status, "internal_server_error")
            return fault.status, _error(fault.status, name, "injected fault"), extra, None
        key = headers.get("idempotency-key")
        body_hash = json.dumps(body, sort_keys=True)
        now = self.clock()
        with self._lock:
            remembered = self._keys.get(key) if key else None
            if remembered is not None and now - remembered.at > DEDUP_SECONDS:
                remembered = None
            if remembered is None and key:
                remembered = self._keys[key] = _Remembered(body_hash, 0, {}, now)
                fresh = True
            else:
                fresh = key is None
        if not fresh:
            assert remembered is not None
            if remembered.body_hash != body_hash:
                message = "same idempotency key used with a different body"
                return 409, _error(409, "invalid_idempotent_request", message), {}, None
            if not remembered.done.is_set():
                message = "another request with this idempotency key is in progress"
                return 409, _error(409, "concurrent_idempotent_requests", message), {}, None
            with self._lock:
                self.replays += 1
            return remembered.status, remembered.answer, {}, None
        delivered = _delivered(body, key, now)
        with self._lock:
            self.delivered.append(delivered)
        answer = {"id": delivered.id}
        if remembered is not None:
            # Done once answered (or dropped): until then a repeat is "concurrent".
            remembered.status, remembered.answer = 200, answer
        if self.on_accept is not None:
            self.on_accept(peer, delivered)
        return 200, answer, {}, fault

    def wait_stall(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def answered(self, headers: dict[str, str]) -> None:
        """The request under this key has had its answer (or its dropped connection)."""
        key = headers.get("idempotency-key")
        with self._lock:
            remembered = self._keys.get(key) if key else None
        if remembered is not None and remembered.status:
            remembered.done.set()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A sender killed or timed out mid-request resets its connection:
        # expected here, not worth a traceback on stderr.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _error(status: int, name: str, message: str) -> dict[str, Any]:
    return {"statusCode": status, "name": name, "message": message}


def _validate(body: object) -> str | None:
    if not isinstance(body, dict):
        return "body must be a JSON object"
    unknown = sorted(set(body) - DOCUMENTED_FIELDS)
    if unknown:
        return f"unknown fields: {unknown}"
    missing = [f for f in REQUIRED_FIELDS if not body.get(f)]
    if missing:
        return f"missing required fields: {missing}"
    if "html" not in body and "text" not in body and "template" not in body:
        return "one of html, text or template is required"
    to = body["to"]
    if not (isinstance(to, str) or (isinstance(to, list) and all(isinstance(t, str) for t in to))):
        return "to must be a string or an array of strings"
    headers = body.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return "headers must be an object of strings"
    return None


def _delivered(body: dict[str, Any], key: str | None, now: float) -> Delivered:
    to = body["to"]
    job = body.get("headers", {}).get("X-Authsvc-Job")
    return Delivered(
        id=str(uuid.uuid4()), idempotency_key=key,
        public_job_id=job if isinstance(job, str) and job else None,
        to=tuple([to] if isinstance(to, str) else to), subject=str(body.get("subject", "")),
        text=str(body.get("text", "")), html=str(body.get("html", "")), body=body,
        accepted_at=now,
    )


def _handler_for(provider: LocalResend) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the worker reuses its connection

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path != "/emails":
                self._reply(404, _error(404, "not_found", "no such endpoint"), {})
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer, extra, fault = provider.handle(
                headers, raw, (self.client_address[0], self.client_address[1]))
            try:
                if fault is not None and fault.kind == "drop":
                    self.close_connection = True  # accepted, and no answer ever comes
                    return
                if fault is not None and fault.kind == "stall":
                    provider.wait_stall(fault.stall_seconds)
                self._reply(status, answer, extra)
            finally:
                provider.answered(headers)

        def _reply(self, status: int, answer: dict[str, Any], extra: dict[str, str]) -> None:
            data = json.dumps(answer).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                self.close_connection = True  # the caller gave up (timed out, was killed)

    return Handler
