"""One job, start to finish: check, render, send outside any transaction, record.

`decide` does everything but the record, so a worker can hand outcomes to its
batched completer (authsvc/worker/completer.py); `deliver` records at once.

Failure classes and what each does:
  superseded / expired link  → marked, never sent;
  an app that delivers its own mail (hook_delivery.py) → its URL instead of the mailer;
  suppressed recipient (bounced or complained, bounces/suppressions.py) → marked, never sent;
  transient (4xx, connection errors, timeouts before DATA; HTTP 408/429/5xx and
             lost answers under an idempotency key) → retry with backoff,
             no sooner than the provider's Retry-After;
  permanent (5xx, rejected recipient, template errors,
             an address the server cannot take, encoding errors) → failed, reason kept;
  ambiguous (connection lost after the final dot)          → retried once, recorded as such;
  lease lost (another worker took over)                    → nothing overwritten, logged.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from psycopg_pool import ConnectionPool

from authsvc.clock import Clock, system_clock
from authsvc.emails.looks import LooksUnavailable
from authsvc.worker.jobs import ClaimedJob, Outcome
from authsvc.worker.mailers import (
    AmbiguousSendError,
    Mailer,
    PermanentSendError,
    TransientSendError,
)
from authsvc.worker.render import Renderer, TemplateError

if TYPE_CHECKING:  # hook_delivery imports event_delivery, which imports RetryPolicy from here
    from authsvc.worker.hook_delivery import HookDelivery

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    base_seconds: float = 30.0
    cap_seconds: float = 3600.0

    def delay(self, attempt: int) -> float:
        """Exponential in the attempt, plus up to 50% jitter so retries never bunch up."""
        exponential = min(self.cap_seconds, self.base_seconds * 2 ** (attempt - 1))
        return exponential * (1 + random.random() / 2)


@dataclass(frozen=True)
class Delivery:
    """What delivering needs, shared by every sender thread of a worker."""

    pool: ConnectionPool
    renderer: Renderer
    retry: RetryPolicy
    send_timeout: float
    clock: Clock = system_clock
    # Apps that deliver their own mail; None: such emails wait for a worker that can.
    hook: HookDelivery | None = None

    def decide(self, mailer: Mailer, job: ClaimedJob, lease_deadline: float) -> Outcome:
        """Check, render and send one claimed job; the outcome is left for the caller to record."""
        if job.suppressed:
            # A provider reported this address (hard bounce, complaint): never
            # send; the API answered 202 all the same (no enumeration).
            return Outcome(job, "suppressed",
                           error="recipient is on the suppression list; not sent")
        if job.superseded:
            error = f"version {job.token_version} replaced by {job.current_version}"
            return Outcome(job, "superseded", error=error)
        expires_at = self.renderer.link_expires_at(job)
        if expires_at is not None and expires_at <= self.clock():
            error = f"link expired at {expires_at.isoformat()} before it could be sent"
            return Outcome(job, "expired", error=error)
        if job.attempt_count > self.retry.max_attempts:
            # Only reachable when leases kept expiring (workers dying mid-send).
            return Outcome(job, "failed", error=f"gave up after {job.attempt_count - 1} attempts")
        if time.monotonic() + self.send_timeout > lease_deadline:
            # Sending now could outlive the lease and race the next owner.
            return Outcome(job, "released", error="lease too close to expiry")
        try:
            email = self.renderer.render(job)
        except TemplateError as exc:
            return Outcome(job, "failed", error=str(exc))
        except LooksUnavailable as exc:  # nothing sent: a retry is safe
            return self._retry(job, str(exc), ambiguous=False)
        try:
            if job.delivery_url is None:
                provider_id = mailer.send(email)
            elif self.hook is None:
                raise TransientSendError("this worker was started without webhook delivery")
            else:
                provider_id = self.hook.send(job, email)
        except PermanentSendError as exc:
            return Outcome(job, "failed", error=exc.reason)
        except AmbiguousSendError as exc:
            if job.ambiguous_before or job.attempt_count >= self.retry.max_attempts:
                error = f"ambiguous again, may have been delivered: {exc.reason}"
                return Outcome(job, "failed", error=error)
            return self._retry(job, exc.reason, ambiguous=True)
        except TransientSendError as exc:
            if job.attempt_count >= self.retry.max_attempts:
                error = f"attempts exhausted ({job.attempt_count}): {exc.reason}"
                return Outcome(job, "failed", error=error)
            return self._retry(job, exc.reason, ambiguous=False, at_least=exc.retry_after,
                               at_most=exc.retry_within)
        except UnicodeError as exc:
            # A mailer let an encoding error escape: this message's data is at
            # fault, not the process. Its connection is in an unknown state.
            mailer.close()
            error = f"cannot encode the message: {type(exc).__name__}: {exc}"
            return Outcome(job, "failed", error=error)
        return Outcome(job, "sent", provider_message_id=provider_id)

    def _retry(self, job: ClaimedJob, error: str, *, ambiguous: bool,
               at_least: float | None = None, at_most: float | None = None) -> Outcome:
        delay = self.retry.delay(job.attempt_count)
        if at_most is not None:
            # An unknown outcome under a key the provider forgets soon: come
            # back while it still remembers, or the retry may deliver twice.
            delay = min(delay, at_most)
        # The provider's Retry-After is a floor: our backoff may wait longer.
        delay = max(delay, at_least or 0.0)
        return Outcome(job, "ambiguous" if ambiguous else "retry", error=error, delay_seconds=delay)
