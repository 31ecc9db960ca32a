"""An app's own mail delivery (SPEC §10 `hook://`): the rendered email as a Standard Webhook.

For an email the claim marked with the app's delivery URL (its own account,
proven, its alone: migrations/0029), the sender POSTs
`{"type": "email.send", "timestamp", "data": {to, from, subject, text, html,
kind, locale, link, code}}` there instead of handing it to the transport,
signed with the app's `whsec_` secret. `webhook-id` is `authsvc-job-PUBLIC_ID`,
the same on every attempt (the body too), so the app deduplicates retries;
each attempt signs its own `webhook-timestamp`. The target is checked by the
same rules as event targets and connected to at a checked address
(authsvc/worker/event_delivery.py post_event).

What each answer does, by the same rule as a provider's
(authsvc/worker/providers/http.py): 2xx → sent; 408, 429, 5xx, any non-4xx,
a timeout or a refused or unreachable target → retried with backoff (no
sooner than Retry-After), safe because the app deduplicates on the id; any
other 4xx → failed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC

from authsvc.app_events.secrets import SealedSecretError, open_secret
from authsvc.app_events.targets import WebhookTargetRefused
from authsvc.clock import Clock, system_clock
from authsvc.worker.event_delivery import WebhookSendError, post_event, signed_headers
from authsvc.worker.jobs import ClaimedJob
from authsvc.worker.mailers import OutgoingEmail, PermanentSendError, TransientSendError
from authsvc.worker.providers.http import refusal_is_permanent, retry_after_seconds

EVENT_TYPE = "email.send"

def hook_body(job: ClaimedJob, email: OutgoingEmail, mail_from: str) -> tuple[str, str]:
    """(webhook-id, body): the same bytes on every attempt of the job."""
    queued = job.created_at.astimezone(UTC) if job.created_at is not None else None
    event = {
        "type": EVENT_TYPE,
        "timestamp": queued.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        if queued else None,
        "data": {
            "to": email.recipient, "from": mail_from, "subject": email.subject,
            "text": email.text, "html": email.html, "kind": email.kind, "locale": email.locale,
            "link": email.link, "code": email.code,
        },
    }
    return email.idempotency_key, json.dumps(event, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class HookDelivery:
    """What posting to apps' delivery URLs needs, shared by every sender thread."""

    secret_keys: tuple[str, ...] = field(repr=False)
    send_timeout: float
    production: bool
    clock: Clock = system_clock

    def send(self, job: ClaimedJob, email: OutgoingEmail) -> str:
        """POST the email to the job's delivery URL; its webhook-id, or a SendError."""
        assert job.delivery_url is not None
        if job.webhook_secret is None or job.app_id is None:
            raise TransientSendError("the app has no signing secret now")
        try:
            secret = open_secret(self.secret_keys, job.app_id, job.webhook_secret)
        except SealedSecretError as exc:
            raise PermanentSendError(str(exc)) from None
        webhook_id, body = hook_body(job, email, email.from_header or email.sender)
        headers = signed_headers(secret, webhook_id, body, self.clock().astimezone(UTC))
        try:
            answer = post_event(job.delivery_url, body, headers, timeout=self.send_timeout,
                                production=self.production)
        except WebhookTargetRefused as exc:
            # Retried: the operator may fix the URL (`apps update`) meanwhile.
            raise TransientSendError(f"delivery URL refused: {exc}") from None
        except WebhookSendError as exc:
            # It may have arrived: the retry carries the same webhook-id.
            raise TransientSendError(f"app unreachable: {exc}") from None
        if 200 <= answer.status < 300:
            return webhook_id
        text = f"the app's delivery URL answered HTTP {answer.status}"
        if refusal_is_permanent(answer.status):
            raise PermanentSendError(text)
        raise TransientSendError(text, retry_after=retry_after_seconds(answer.retry_after))
