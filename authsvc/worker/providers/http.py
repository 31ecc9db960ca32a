"""What an HTTP mail provider's answer means, and the client every HTTP provider shares.

The rule lives here once; a provider module only says its request shape and
what its answers mean (its message id, its error text, which of its 4xx say
"try again" and whether an answer says "already accepted"):

- 2xx with the provider's message id → sent, the id kept. A 2xx without one
  (an empty or garbled body, an HTML page from a proxy) proves nothing was
  accepted by the provider: it is an unknown outcome, like a lost answer.
- 408, 429, 5xx, and anything else that is not a 4xx (a 3xx: this client
  never follows redirects) → retry with backoff, no sooner than the
  provider's `Retry-After` (or its own rate-limit reset header).
- any other 4xx → failed, with the provider's message — unless the provider
  documents that 4xx as worth retrying, or as "this key was already
  accepted" (Brevo), which is sent.
- a timeout, a dropped connection or a trickling answer after the request
  went out → unknown outcome. With an idempotency key the retry carries the
  same key and the provider answers the first result again (or that it
  already has it), so it is an ordinary retry; without one it is
  *ambiguous*, as after SMTP's final dot (retried once, then failed: see
  docs/worker.md).

`greet()` is what `authsvc check` asks of a provider: one authenticated,
read-only call (`greeting_path`, never a send), its answer classified into
one line: the key accepted (2xx, or a refusal the provider documents as "this
key can only send"), the key refused (401, 403), another status named, or
the provider unreachable or silent.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import httpx

from authsvc.config import HttpProviderTarget
from authsvc.worker.mailers import (
    MAILER_IDLE_SECONDS,
    AmbiguousSendError,
    OutgoingEmail,
    PermanentSendError,
    SendError,
    TransientSendError,
)

RETRY_STATUSES = frozenset({408, 429})
# Past this a provider's Retry-After is not believed (a day: beyond it the
# idempotency key itself would have expired at the provider).
MAX_RETRY_AFTER_SECONDS = 86400.0
MAX_REASON_CHARS = 500
# An answer is a small JSON document; reading a provider's (or a proxy's)
# endless body would hold the sender, so anything longer is cut here.
MAX_ANSWER_BYTES = 64 * 1024
USER_AGENT = "authsvc-worker"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if _ascii_digits(text):
        return min(float(text), MAX_RETRY_AFTER_SECONDS)
    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):  # a year past the calendar
        return None
    wait = when - (time.time() if now is None else now)
    return min(max(0.0, wait), MAX_RETRY_AFTER_SECONDS)


def unix_time_wait(value: str | None, now: float | None = None) -> float | None:
    """Seconds until a Unix time (a rate-limit reset header), or None when it is not one."""
    text = (value or "").strip()
    if not _ascii_digits(text) or len(text) > 12:  # past the year 33000: not a reset time
        return None
    wait = int(text) - (time.time() if now is None else now)
    return min(max(0.0, wait), MAX_RETRY_AFTER_SECONDS)


def _ascii_digits(text: str) -> bool:
    # str.isdigit() alone also takes "²" or "٣", which float() and int() may refuse.
    return text.isascii() and text.isdigit()


def refusal_is_permanent(status: int) -> bool:
    """A non-2xx answer that retrying cannot fix: a 4xx other than 408 and 429."""
    return 400 <= status < 500 and status not in RETRY_STATUSES


def short(text: str) -> str:
    """One line of at most MAX_REASON_CHARS, for `last_error`."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def json_field(answer: Any, name: str) -> str | None:
    """A non-empty string field of a JSON object answer, or None."""
    if isinstance(answer, dict):
        value = answer.get(name)
        if isinstance(value, str) and value.strip():
            return value
    return None


KEY_REFUSED = frozenset({401, 403})


@dataclass(frozen=True)
class Greeting:
    """What a provider answered `authsvc check`'s read-only call, as one line."""

    ok: bool
    detail: str  # never the key: the provider's own words, with the key taken out


class _NoAnswer(Exception):
    """The answer did not arrive whole within the send timeout."""


class _Deadline:
    """Cuts a request's connection when its time is up, whatever it is blocked on.

    Every socket operation has its own timeout, so a peer that answers a
    little just inside it each time (a trickled status line, header or body)
    would hold the send long past the send timeout, and the lease with it:
    another worker could then send the job again. Shutting the socket down
    wakes the blocked read or write at once; the request then fails as a lost
    answer. Connecting has no socket to cut yet; its own timeout bounds it.
    """

    def __init__(self, seconds: float, connection: Callable[[], Any]) -> None:
        self.at = time.monotonic() + seconds
        self.cut = False
        self._connection = connection
        self._lock = threading.Lock()
        self._over = False
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        with self._lock:
            if self._over:
                return
            self.cut = True
            stream = self._connection()
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed by the sender
                sock.shutdown(socket.SHUT_RDWR)

    def over(self) -> bool:
        """Stop the watch; True when it had already cut the connection."""
        with self._lock:
            self._over = True
        self._timer.cancel()
        return self.cut


class HttpProviderMailer:
    """One provider API client per sender thread; a subclass says what to send and read.

    The client keeps one connection alive across jobs. Its timeouts split the
    send timeout between connecting, writing and reading, and a `_Deadline`
    cuts the connection when the send timeout is up, so a request ends inside
    the lease (authsvc/worker/delivery.py checks that the send timeout still
    fits before it sends) however the peer paces its answer.
    """

    name: ClassVar[str] = "http"
    path: ClassVar[str] = "/"
    # Whether the provider honours this mailer's idempotency key: only then is
    # a retry after an unknown outcome safe.
    idempotent: ClassVar[bool] = False
    # Where the key goes, when it is an HTTP header (Brevo takes it in the body).
    idempotency_header: ClassVar[str | None] = None
    # How long the provider remembers a key; None: longer than any retry.
    idempotency_window_seconds: ClassVar[float | None] = None
    # The authenticated, read-only call `authsvc check` makes: it proves the
    # host, its certificate and the key, and sends nothing.
    greeting_path: ClassVar[str] = "/"

    def __init__(self, target: HttpProviderTarget, *, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self._client: httpx.Client | None = None
        # The client's one connection (max_connections=1), for _Deadline to cut.
        self._stream: Any = None

    # What a provider module defines.
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.target.api_key}"}

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        """The JSON body: the same on every attempt (a provider compares it under its key)."""
        raise NotImplementedError

    def idempotency_key(self, email: OutgoingEmail) -> str:
        """The key this provider gets for `email`: derived from the job, never the attempt."""
        return email.idempotency_key

    def build_request(self, client: httpx.Client, email: OutgoingEmail) -> httpx.Request:
        """The request for `email`; JSON at `path` unless the provider takes another shape."""
        headers = {"Accept": "application/json"}
        if self.idempotent and self.idempotency_header:
            headers[self.idempotency_header] = self.idempotency_key(email)
        return client.build_request("POST", self.path, json=self.body(email), headers=headers)

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        """The provider's id for an accepted message, or None if the answer carries none."""
        raise NotImplementedError

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        """The provider's own words for a refusal (`answer`: its JSON, or None)."""
        return text

    def retryable_refusal(self, response: httpx.Response, answer: Any) -> bool:
        """A 4xx this provider documents as "try again" (besides 408 and 429)."""
        return False

    def already_accepted(self, response: httpx.Response, answer: Any) -> bool:
        """A refusal that says this very key was accepted before (so: sent)."""
        return False

    def retry_after(self, response: httpx.Response) -> float | None:
        """How long the provider asked us to wait, if it said."""
        return retry_after_seconds(response.headers.get("Retry-After"))

    def greeting_request(self, client: httpx.Client) -> httpx.Request:
        """The read-only call: GET `greeting_path` with the key, unless the provider signs."""
        return client.build_request("GET", self.greeting_path,
                                    headers={"Accept": "application/json"})

    def greeting_answer(self, answer: Any) -> tuple[bool, str]:
        """(still ok, a few words) from a 2xx answer: what it says that an operator wants."""
        return True, ""

    def key_refused(self, response: httpx.Response, answer: Any) -> bool:
        """Whether a non-2xx answer to the read-only call says the key is not good."""
        return response.status_code in KEY_REFUSED

    def key_only_restricted(self, response: httpx.Response, answer: Any) -> str | None:
        """A 401/403 that names the key as the provider's own, only not allowed to read
        (a sending-only key): a few words saying so; None for a refused key."""
        return None

    # The shared part.
    def greet(self) -> Greeting:
        """One authenticated read-only call, classified; nothing is sent, nothing raised."""
        client = self._session()
        request = self._traced(self.greeting_request(client))
        what = f"{request.method} {request.url.path}"
        deadline = self._watch()
        try:
            response = client.send(request, stream=True)
            try:
                raw = self._read(response, deadline.at)
            finally:
                response.close()
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            return Greeting(False, self._unkeyed(
                f"unreachable: {type(exc).__name__}: {exc or 'no connection'}"))
        except (httpx.TimeoutException, _NoAnswer) as exc:
            return Greeting(False, self._unkeyed(
                f"timed out: no answer to {what} within {self.timeout:g} s"
                f" ({type(exc).__name__})"))
        except httpx.TransportError as exc:
            if deadline.cut:
                return Greeting(False, self._unkeyed(
                    f"timed out: no whole answer to {what} within {self.timeout:g} s"))
            return Greeting(False, self._unkeyed(
                f"no answer to {what}: {type(exc).__name__}: {exc or 'connection lost'}"))
        finally:
            deadline.over()
            self.close()
        try:
            answer: Any = json.loads(raw) if raw else None
        except ValueError:
            answer = None
        status = response.status_code
        if 200 <= status < 300 and not isinstance(answer, dict):
            # A proxy's or a captive portal's page proves nothing about the key.
            body = short(raw.decode("utf-8", "replace")) or "(empty)"
            return Greeting(False, self._unkeyed(
                f"{what} answered {status}, but not as {self.name} does: {body}"))
        if 200 <= status < 300:
            ok, words = self.greeting_answer(answer)
            said = (f"; {words}" if ok else f", but {words}") if words else ""
            return Greeting(ok, self._unkeyed(f"key accepted ({what}: {status}){said}"))
        reason = short(self.error_message(response, answer, raw.decode("utf-8", "replace"))
                       or response.reason_phrase)
        if self.key_refused(response, answer):
            restricted = self.key_only_restricted(response, answer)
            if restricted is not None:
                return Greeting(True, self._unkeyed(
                    f"key accepted ({what}: {status}, {restricted})"))
            return Greeting(False, self._unkeyed(f"key refused ({what}: {status} {reason})"))
        return Greeting(False, self._unkeyed(f"{what} answered {status}: {reason}"))

    def _unkeyed(self, text: str) -> str:
        """`text` with the credentials taken out, whatever a provider (or a proxy) echoed."""
        for credential in (self.target.api_key, self.target.secret):
            if credential:
                text = text.replace(credential, "***")
        return text

    def _session(self) -> httpx.Client:
        if self._client is None:
            t = self.timeout
            self._client = httpx.Client(
                base_url=self.target.base_url,
                headers={**self.auth_headers(), "User-Agent": USER_AGENT},
                timeout=httpx.Timeout(connect=t / 4, write=t / 4, read=t / 2, pool=t / 4),
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1,
                                    keepalive_expiry=MAILER_IDLE_SECONDS),
                follow_redirects=False,
            )
        return self._client

    def _traced(self, request: httpx.Request) -> httpx.Request:
        """`request`, telling this mailer which connection carries it (httpx's trace)."""
        def trace(event: str, info: dict[str, Any]) -> None:
            if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
                self._stream = info.get("return_value")
        request.extensions["trace"] = trace
        return request

    def _watch(self) -> _Deadline:
        return _Deadline(self.timeout, lambda: self._stream)

    def send(self, email: OutgoingEmail) -> str:
        client = self._session()
        request = self._traced(self.build_request(client, email))
        deadline = self._watch()
        try:
            return self._send_watched(client, request, email, deadline)
        finally:
            # Whatever ended the send, the watch ends with it: a timer left
            # running would cut whichever request this connection carries next.
            deadline.over()

    def _send_watched(self, client: httpx.Client, request: httpx.Request,
                      email: OutgoingEmail, deadline: _Deadline) -> str:
        try:
            response = client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            deadline.over()
            self.close()
            raise TransientSendError(f"connect: {type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            # The request may have reached the provider and been accepted.
            cut = deadline.over()
            self.close()
            raise self._unknown_outcome(
                f"no answer: {self._why(cut, exc, 'connection lost')}") from None
        try:
            raw = self._read(response, deadline.at)
        except (httpx.TransportError, _NoAnswer) as exc:
            cut = deadline.over()
            self.close()
            raise self._unknown_outcome(
                f"HTTP {response.status_code}, answer cut off: "
                f"{self._why(cut, exc, 'connection lost')}") from None
        except httpx.DecodingError:
            # A body that is not the Content-Encoding it claims: the status
            # still says what happened (a 2xx without a readable id is unknown).
            deadline.over()
            self.close()
            raw = b""
        finally:
            response.close()
        if deadline.over():
            # Cut just as the answer completed: the connection is no longer usable.
            self.close()
        try:
            return self._answer(response, raw, email)
        except SendError:
            raise
        except Exception as exc:
            # A provider module that cannot read some answer must not stop the
            # worker (any other exception does): whatever it was, it is unknown.
            raise self._unknown_outcome(
                f"HTTP {response.status_code}, an answer {self.name}'s reader could not read: "
                f"{type(exc).__name__}: {exc}") from None

    def _why(self, cut: bool, exc: Exception, otherwise: str) -> str:
        """Why a request ended without its answer, for `last_error`."""
        if cut:
            return f"no whole answer within the send timeout ({self.timeout:g} s)"
        return f"{type(exc).__name__}: {exc or otherwise}"

    @staticmethod
    def _read(response: httpx.Response, deadline: float) -> bytes:
        """The answer's body, at most MAX_ANSWER_BYTES, arrived by `deadline`."""
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                # Each read has its own timeout; a body trickled one byte at
                # a time would otherwise hold the send past the lease.
                raise _NoAnswer("the answer did not arrive within the send timeout")
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                break  # enough to classify; the connection is dropped after
        return b"".join(chunks)[:MAX_ANSWER_BYTES]

    def _unknown_outcome(self, reason: str) -> SendError:
        """A send that may or may not have been accepted: safe to retry only under a key."""
        if self.idempotent:
            return TransientSendError(f"{reason}; retried with the same key",
                                      retry_within=self._key_window_retry())
        return AmbiguousSendError(reason)

    def _key_window_retry(self) -> float | None:
        # Retry while the provider still remembers the key (half its window,
        # so a busy queue still makes it); after that a retry could deliver twice.
        window = self.idempotency_window_seconds
        return None if window is None else window / 2

    def _answer(self, response: httpx.Response, raw: bytes, email: OutgoingEmail) -> str:
        try:
            answer: Any = json.loads(raw) if raw else None
        except (ValueError, RecursionError):  # not JSON, not UTF-8, cut off, or nested too deep
            answer = None
        status = response.status_code
        if 200 <= status < 300:
            provider_id = self.message_id(answer, response)
            if provider_id:
                return provider_id
            body = raw.decode("utf-8", "replace") or "(empty)"
            raise self._unknown_outcome(
                f"HTTP {status} without a message id from {self.name}: {short(body)}")
        if self.already_accepted(response, answer):
            return self.idempotency_key(email)
        reason = self.error_message(response, answer, raw.decode("utf-8", "replace"))
        text = f"HTTP {status}: {short(reason or response.reason_phrase)}"
        error: SendError
        if refusal_is_permanent(status) and not self.retryable_refusal(response, answer):
            error = PermanentSendError(text)
        else:
            error = TransientSendError(text, retry_after=self.retry_after(response))
        raise error

    def close(self) -> None:
        self._stream = None
        client, self._client = self._client, None
        if client is not None:
            client.close()
