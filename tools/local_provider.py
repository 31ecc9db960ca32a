"""What every local mail provider shares: one HTTP server, faults, deliveries, keys.

Not part of authsvc's runtime (the wheel ships `authsvc` only). Each fake
(tools/local_resend.py, local_postmark.py, local_ses.py, local_sendgrid.py,
local_mailgun.py, local_brevo.py) is a subclass written from that provider's
API reference, separately from authsvc's mailers: it says which request is
its send endpoint, how it authenticates, what a valid body is, what it
answers and where an idempotency key goes; this module runs the server.

Every fake can be told to misbehave, by script (`fail_next`, `stall_next`,
`drop_next`, `answer_next`) or at random rates (`FaultRates`): answer an
error status (429 with `Retry-After`, 500) in the provider's own error shape,
stall after accepting (the caller times out and retries), drop the
connection after accepting, or answer something that is not the provider's
answer at all (an HTML page, truncated JSON). An `on_accept` hook runs after
a message is stored and before it is answered: the chaos harness kills the
sending worker there.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

_TOKEN = re.compile(r"[?&]token=([A-Za-z0-9_.\-]+)")
# The public job id a fake's notifications carry unless told another: a test's
# sent job takes it to be the message the notification is about.
SAMPLE_JOB = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: status, body bytes, extra headers."""

    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    @classmethod
    def json(cls, status: int, document: object, **headers: str) -> Answer:
        return cls(status, json.dumps(document).encode(), headers)


@dataclass(frozen=True)
class Message:
    """The parts of a send request every provider has, read in the provider's own shape."""

    to: tuple[str, ...]
    subject: str
    text: str
    html: str
    public_job_id: str | None  # from the X-Authsvc-Job header, wherever the provider carries it
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Delivered:
    """One message the provider accepted (after deduplication: one per key)."""

    id: str
    idempotency_key: str | None
    public_job_id: str | None
    to: tuple[str, ...]
    subject: str
    text: str
    html: str
    body: Any  # the request as the provider parsed it (JSON, or form fields)
    accepted_at: float

    @property
    def token(self) -> str | None:
        match = _TOKEN.search(self.text)
        return match.group(1) if match else None


@dataclass(frozen=True)
class Fault:
    """What to do with one request instead of answering it plainly."""

    kind: str  # "fail" (status; nothing accepted) | "stall" | "drop" | "answer"
    status: int = 500
    retry_after: str | None = None
    code: object = None  # kind "fail": the provider's own error code (coded_error)
    stall_seconds: float = 0.0
    answer: Answer | None = None  # kind "answer": sent as is
    accept: bool = False  # kind "answer": store the message first


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
class Remembered:
    """An idempotency key the provider has seen."""

    body_hash: str
    at: float
    answer: Answer | None = None  # set once accepted
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Notification:
    """A bounce or complaint notification as the provider would POST it to authsvc."""

    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Unreadable:
    """Why a send's JSON body was refused before its fields were read: not JSON at all,
    JSON but not an object, or an object with fields the provider does not document."""

    not_json: bool = False
    unknown: list[str] = field(default_factory=list)


def read_json_send(raw: bytes, documented: frozenset[str]) -> dict[str, Any] | Unreadable:
    """A send's body when it is a JSON object of documented fields; each fake answers an
    Unreadable in its provider's own words."""
    try:
        body = json.loads(raw)
    except ValueError:
        return Unreadable(not_json=True)
    if not isinstance(body, dict):
        return Unreadable()
    unknown = sorted(set(body) - documented)
    return Unreadable(unknown=unknown) if unknown else body


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass(frozen=True)
class Request:
    """One request as the fake received it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names
    raw: bytes
    peer: tuple[str, int]


class LocalProvider:
    """Start with `with LocalX() as provider:`; point the worker at `provider.mail_url`."""

    name: ClassVar[str] = "provider"
    # How long a key is remembered; None: the provider takes no key.
    key_seconds: ClassVar[float | None] = None

    def __init__(self, api_key: str, *, rates: FaultRates | None = None, seed: int = 0,
                 clock: Callable[[], float] = time.time,
                 on_accept: Callable[[tuple[str, int], Delivered], None] | None = None) -> None:
        self.api_key = api_key
        self.rates = rates or FaultRates()
        self.clock = clock
        self.on_accept = on_accept
        self.delivered: list[Delivered] = []
        self.requests: list[dict[str, Any]] = []  # every send request: headers, body, peer
        self.other_requests: list[Request] = []  # anything else (certificates, confirmations)
        self.replays = 0  # requests answered from the idempotency store
        self.faults: dict[str, int] = {"rate_limited": 0, "server_error": 0,
                                       "stall_after_accept": 0, "drop_after_accept": 0}
        self._scripted: list[Fault] = []
        self._keys: dict[str, Remembered] = {}
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # stop() waits for the serving loop to look at its flag, every poll_interval
        # (0.5 s by default): a short one ends a test's fake at once.
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=f"local-{self.name}", daemon=True)

    # What a provider defines.
    def is_send(self, method: str, path: str) -> bool:
        raise NotImplementedError

    def authenticate(self, request: Request) -> Answer | None:
        """None when the credentials are right, else the provider's refusal."""
        raise NotImplementedError

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        """(the parsed body, its message) from a valid request, else the provider's refusal."""
        raise NotImplementedError

    def accepted(self, message_id: str) -> Answer:
        raise NotImplementedError

    def error(self, status: int, message: str) -> Answer:
        """The provider's own error shape for `status`."""
        raise NotImplementedError

    def coded_error(self, status: int, code: object, message: str) -> Answer:
        """`status` with the provider's own error code, for a provider whose codes say more
        than the status (SES's error types, Postmark's ErrorCode)."""
        raise AssertionError(f"{self.name} has no error codes of its own here")

    def repeated(self, remembered: Remembered, body_hash: str) -> Answer:
        """The answer to a key seen within `key_seconds`; only a provider that sets it asks."""
        raise AssertionError(f"{self.name} takes no idempotency key")

    def new_message_id(self) -> str:
        return str(uuid.uuid4())

    def other(self, request: Request) -> Answer:
        """Anything but the send endpoint: 404 unless a provider serves more."""
        return self.error(404, "no such endpoint")

    # Notifications, signed or credentialed as the provider does it.
    def webhook_settings(self) -> dict[str, str]:
        """The authsvc settings that make its endpoint accept this fake's notifications."""
        raise NotImplementedError

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "provider-message-1") -> Notification:
        raise NotImplementedError

    def complaint(self, address: str, *, message_id: str = "provider-message-1") -> Notification:
        raise NotImplementedError

    def delivery(self, address: str, *, message_id: str = "provider-message-1") -> Notification:
        """An event that suppresses nothing."""
        raise NotImplementedError

    @property
    def mail_url(self) -> str:
        return f"{self.name}+http://{self.api_key}@127.0.0.1:{self.port}"

    # The shared part.
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Any:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # Scripted faults, applied to the next send requests in order.
    def fail_next(self, status: int, *, retry_after: str | None = None, times: int = 1,
                  code: object = None) -> None:
        """Refuse the next sends with `status` (and, given `code`, that error of the
        provider's own, as coded_error shapes it)."""
        with self._lock:
            self._scripted += [Fault("fail", status=status, retry_after=retry_after,
                                     code=code)] * times

    def stall_next(self, seconds: float, times: int = 1) -> None:
        with self._lock:
            self._scripted += [Fault("stall", stall_seconds=seconds)] * times

    def drop_next(self, times: int = 1) -> None:
        with self._lock:
            self._scripted += [Fault("drop")] * times

    def answer_next(self, answer: Answer, *, accept: bool = False, times: int = 1) -> None:
        """Answer exactly this (a proxy's page, a garbled body), storing the message if `accept`."""
        with self._lock:
            self._scripted += [Fault("answer", answer=answer, accept=accept)] * times

    def idle(self) -> bool:
        """No request is still being answered (stalled) under its key."""
        with self._lock:
            return all(r.done.is_set() for r in self._keys.values())

    def snapshot(self) -> list[Delivered]:
        with self._lock:
            return list(self.delivered)

    def forget_keys_older_than(self, seconds: float) -> None:
        """Let time pass for the key store (a retry after the provider's window)."""
        with self._lock:
            for remembered in self._keys.values():
                remembered.at -= seconds

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

    def handle(self, request: Request) -> tuple[Answer, Fault | None, str | None]:
        """(answer, fault to act on after storing, key) for one send request."""
        refused = self.authenticate(request)
        if refused is not None:
            return refused, None, None
        read = self.read_message(request)
        if isinstance(read, Answer):
            with self._lock:
                self.requests.append({"headers": request.headers, "body": None,
                                      "raw": request.raw, "peer": request.peer})
            return read, None, None
        body, message = read
        with self._lock:
            self.requests.append({"headers": request.headers, "body": body,
                                  "raw": request.raw, "peer": request.peer})
        fault = self._next_fault()
        if fault is not None and fault.kind == "fail":
            answer = (self.error(fault.status, "injected fault") if fault.code is None
                      else self.coded_error(fault.status, fault.code, "injected fault"))
            if fault.retry_after:
                answer = Answer(answer.status, answer.body,
                                {**answer.headers, "Retry-After": fault.retry_after},
                                answer.content_type)
            return answer, None, None
        if fault is not None and fault.kind == "answer" and not fault.accept:
            assert fault.answer is not None
            return fault.answer, None, None
        key = message.idempotency_key if self.key_seconds is not None else None
        body_hash = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        now = self.clock()
        with self._lock:
            remembered = self._keys.get(key) if key else None
            if remembered is not None and now - remembered.at > (self.key_seconds or 0):
                remembered = None
            fresh = remembered is None
            if fresh and key:
                remembered = self._keys[key] = Remembered(body_hash, now)
        if not fresh:
            assert remembered is not None
            with self._lock:
                self.replays += 1
            return self.repeated(remembered, body_hash), None, None
        delivered = Delivered(
            id=self.new_message_id(), idempotency_key=key, public_job_id=message.public_job_id,
            to=message.to, subject=message.subject, text=message.text, html=message.html,
            body=body, accepted_at=now)
        with self._lock:
            self.delivered.append(delivered)
        answer = self.accepted(delivered.id)
        if fault is not None and fault.kind == "answer":
            assert fault.answer is not None
            answer, fault = fault.answer, None
        if remembered is not None:
            # Done once answered (or dropped): until then a repeat is "concurrent".
            remembered.answer = answer
        if self.on_accept is not None:
            self.on_accept(request.peer, delivered)
        return answer, fault, key

    def wait_stall(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def answered(self, key: str | None) -> None:
        """The request under this key has had its answer (or its dropped connection)."""
        with self._lock:
            remembered = self._keys.get(key) if key else None
        if remembered is not None and remembered.answer is not None:
            remembered.done.set()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A sender killed or timed out mid-request resets its connection:
        # expected here, not worth a traceback on stderr.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(provider: LocalProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the worker reuses its connection

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _request(self) -> Request:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            path, _, query = self.path.partition("?")
            return Request(self.command, path, query,
                           {k.lower(): v for k, v in self.headers.items()}, raw,
                           (self.client_address[0], self.client_address[1]))

        def do_GET(self) -> None:
            request = self._request()
            with provider._lock:
                provider.other_requests.append(request)
            self._reply(provider.other(request))

        def do_POST(self) -> None:
            request = self._request()
            if not provider.is_send(request.method, request.path):
                with provider._lock:
                    provider.other_requests.append(request)
                self._reply(provider.other(request))
                return
            answer, fault, key = provider.handle(request)
            try:
                if fault is not None and fault.kind == "drop":
                    self.close_connection = True  # accepted, and no answer ever comes
                    return
                if fault is not None and fault.kind == "stall":
                    provider.wait_stall(fault.stall_seconds)
                self._reply(answer)
            finally:
                provider.answered(key)

        def _reply(self, answer: Answer) -> None:
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)
            except OSError:
                self.close_connection = True  # the caller gave up (timed out, was killed)

    return Handler
