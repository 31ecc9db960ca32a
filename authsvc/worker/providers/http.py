"""What an HTTP mail provider's answer means, and the client every HTTP provider shares.

SPEC §10's mapping: 2xx → sent (the provider's id kept); 408, 429 and 5xx →
retry with backoff, no sooner than `Retry-After`; any other 4xx → failed,
with the provider's message. A timeout or a dropped connection after the
request went out may hide an accepted message: with an idempotency key the
retry carries the same key and the provider answers the first result again,
so it is an ordinary retry; without one it is *ambiguous*, as after SMTP's
final dot (retried once, then failed: see docs/worker.md).
"""

from __future__ import annotations

import time
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
USER_AGENT = "authsvc-worker"


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds from now: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), MAX_RETRY_AFTER_SECONDS)
    try:
        when = parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    wait = when - (time.time() if now is None else now)
    return min(max(0.0, wait), MAX_RETRY_AFTER_SECONDS)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


class HttpProviderMailer:
    """One provider API client per sender thread; a subclass says what to send and read.

    The client keeps one connection alive across jobs. Its timeouts split the
    send timeout between connecting, writing and reading, so a whole request
    ends within it and therefore inside the lease (authsvc/worker/delivery.py checks
    that the send timeout still fits before it sends).
    """

    name: ClassVar[str] = "http"
    path: ClassVar[str] = "/"
    # Whether the provider honours `idempotency_header`: only then is a retry
    # after an unknown outcome safe.
    idempotent: ClassVar[bool] = False
    idempotency_header: ClassVar[str | None] = None

    def __init__(self, target: HttpProviderTarget, *, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self._client: httpx.Client | None = None

    # What a provider module defines.
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.target.api_key}"}

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        raise NotImplementedError

    def message_id(self, answer: Any, email: OutgoingEmail) -> str:
        raise NotImplementedError

    def error_message(self, answer: Any, response: httpx.Response) -> str:
        return response.text

    def transient_conflict(self, response: httpx.Response, answer: Any) -> bool:
        """A 4xx this provider documents as "try again" (besides 408 and 429)."""
        return False

    # The shared part.
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

    def send(self, email: OutgoingEmail) -> str:
        headers = {}
        if self.idempotent and self.idempotency_header:
            headers[self.idempotency_header] = email.idempotency_key
        client = self._session()
        try:
            response = client.post(self.path, json=self.body(email), headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            self.close()
            raise TransientSendError(f"connect: {type(exc).__name__}: {exc}") from None
        except httpx.TransportError as exc:
            # The request may have reached the provider and been accepted.
            self.close()
            reason = f"no answer: {type(exc).__name__}: {exc or 'connection lost'}"
            if self.idempotent:
                raise TransientSendError(f"{reason}; retried with the same key") from None
            raise AmbiguousSendError(reason) from None
        return self._answer(response, email)

    def _answer(self, response: httpx.Response, email: OutgoingEmail) -> str:
        try:
            answer: Any = response.json()
        except ValueError:
            answer = None
        status = response.status_code
        if 200 <= status < 300:
            return self.message_id(answer, email)
        text = f"HTTP {status}: {_short(self.error_message(answer, response))}"
        error: SendError
        if status in RETRY_STATUSES or status >= 500 or self.transient_conflict(response, answer):
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            error = TransientSendError(text, retry_after=wait)
        else:
            error = PermanentSendError(text)
        raise error

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
