"""Delivering webhook jobs: sign as Standard Webhooks, POST to a checked address, decide.

A webhook job is an outbox row like an email (same claim, lease, completer
and audit trail); only sending differs. The body is the stored event
`{"type","timestamp","data"}`, serialised the same way on every attempt; the
`webhook-id` was fixed when the event was queued, so a receiver that saw an
attempt it answered badly can deduplicate the retry. Each attempt signs with
its own `webhook-timestamp`.

What each answer does: 2xx → sent; anything else, a refused or unreachable
target, a timeout → retry with backoff until the attempts run out, then
failed (kept, and `outbox redrive` can try again). A job whose app was
revoked or lost its webhook fails at once. Redirects are never followed.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from standardwebhooks import Webhook

from authsvc.app_events.secrets import SealedSecretError, open_secret
from authsvc.app_events.targets import (
    IPAddress,
    WebhookTarget,
    WebhookTargetRefused,
    parse_webhook_url,
    resolve_addresses,
)
from authsvc.clock import Clock, system_clock
from authsvc.worker.delivery import RetryPolicy
from authsvc.worker.jobs import ClaimedJob, Outcome

log = logging.getLogger(__name__)
USER_AGENT = "authsvc-webhooks/1"
MAX_RESPONSE_BYTES = 64 * 1024  # read (and ignore) at most this much of an answer


class WebhookSendError(Exception):
    """This attempt did not reach a 2xx answer; worth retrying later."""


def signed_headers(secret: str, webhook_id: str, body: str, at: datetime) -> dict[str, str]:
    """The three Standard Webhooks headers for `body` sent at `at`."""
    signature = Webhook(secret).sign(msg_id=webhook_id, timestamp=at, data=body)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


def event_body(job: ClaimedJob) -> tuple[str, str]:
    """(webhook-id, body) of a webhook job: the same bytes on every attempt."""
    event: dict[str, Any] = job.payload["event"]
    body = json.dumps(
        {"type": event["type"], "timestamp": event["timestamp"], "data": event["data"]},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return str(job.payload["webhook_id"]), body


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Plain HTTP to one already-checked address (never re-resolves the name)."""

    def __init__(self, target: WebhookTarget, address: IPAddress, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = str(address)

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """TLS to one already-checked address; the certificate is checked against the URL's host."""

    def __init__(self, target: WebhookTarget, address: IPAddress, timeout: float) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(target.host, target.port, timeout=timeout, context=self._tls)
        self._address = str(address)

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def _cut_off(connection: http.client.HTTPConnection) -> None:
    """Unblock a send or read in progress (called from the deadline timer)."""
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class PostAnswer(NamedTuple):
    """A receiver's answer: its status, and its Retry-After header if it sent one."""

    status: int
    retry_after: str | None = None


def post_event(
    url: str, body: str, headers: dict[str, str], *, timeout: float, production: bool
) -> PostAnswer:
    """POST `body` to `url`; the answer. WebhookTargetRefused / WebhookSendError otherwise.

    The name is resolved once, every address checked (production), and the
    connection made to a checked address, trying each in turn. `timeout`
    bounds the whole attempt, not each read: a receiver that answers one
    byte at a time is cut off at the deadline, so no send outlives its lease.
    """
    deadline = time.monotonic() + timeout  # resolving counts against it too
    target = parse_webhook_url(url, production=production)
    addresses = resolve_addresses(target, production=production)
    errors = []
    for address in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        connection_class = (
            _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
        )
        connection = connection_class(target, address, timeout=left)
        deadline_timer = threading.Timer(left, _cut_off, (connection,))
        deadline_timer.daemon = True
        deadline_timer.start()
        try:
            connection.request(
                "POST",
                target.path_and_query,
                body=body.encode("utf-8"),
                headers={
                    **headers,
                    "Host": target.host_header,
                    "Content-Type": "application/json",
                    "User-Agent": USER_AGENT,
                },
            )
            response = connection.getresponse()
            response.read(MAX_RESPONSE_BYTES)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no complete answer within {timeout:g}s")
            return PostAnswer(response.status, response.getheader("Retry-After"))
        except (OSError, http.client.HTTPException) as exc:
            late = time.monotonic() >= deadline
            reason = f"no complete answer within {timeout:g}s" if late else str(exc)
            errors.append(f"{address}: {type(exc).__name__}: {reason}")
        finally:
            deadline_timer.cancel()
            connection.close()
    raise WebhookSendError("; ".join(errors) or f"no time left to reach {target.host}")


@dataclass(frozen=True)
class WebhookDelivery:
    """What sending webhooks needs, shared by every sender thread of a worker."""

    secret_keys: tuple[str, ...] = field(repr=False)
    retry: RetryPolicy
    send_timeout: float
    production: bool
    clock: Clock = system_clock

    def decide(self, job: ClaimedJob, lease_deadline: float) -> Outcome:
        """Sign and POST one claimed webhook job; the outcome is left for the caller to record."""
        if job.webhook_url is None or job.webhook_secret is None or job.app_id is None:
            return Outcome(job, "failed", error="the app was revoked or has no webhook URL now")
        if job.attempt_count > self.retry.max_attempts:
            return Outcome(job, "failed", error=f"gave up after {job.attempt_count - 1} attempts")
        if time.monotonic() + self.send_timeout > lease_deadline:
            return Outcome(job, "released", error="lease too close to expiry")
        try:
            secret = open_secret(self.secret_keys, job.app_id, job.webhook_secret)
        except SealedSecretError as exc:
            return Outcome(job, "failed", error=str(exc))
        try:
            webhook_id, body = event_body(job)
        except (KeyError, TypeError) as exc:  # a row not written by authsvc.events
            return Outcome(job, "failed", error=f"malformed event payload: {exc!r}")
        headers = signed_headers(secret, webhook_id, body, self.clock().astimezone(UTC))
        try:
            status = post_event(
                job.webhook_url, body, headers, timeout=self.send_timeout,
                production=self.production,
            ).status
        except WebhookTargetRefused as exc:
            # Retried: the operator may fix the URL (`apps update`) meanwhile.
            return self._retry(job, f"refused: {exc}")
        except WebhookSendError as exc:
            return self._retry(job, f"unreachable: {exc}")
        if 200 <= status < 300:
            return Outcome(job, "sent", provider_message_id=f"http-{status}")
        return self._retry(job, f"receiver answered HTTP {status}")

    def _retry(self, job: ClaimedJob, error: str) -> Outcome:
        if job.attempt_count >= self.retry.max_attempts:
            error = f"attempts exhausted ({job.attempt_count}): {error}"
            return Outcome(job, "failed", error=error)
        return Outcome(job, "retry", error=error, delay_seconds=self.retry.delay(job.attempt_count))
