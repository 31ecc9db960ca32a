"""Brevo's transactional webhooks: JSON events, unsigned.

Brevo signs nothing; its webhook carries a bearer token (`auth` when the
webhook is created) or HTTP basic credentials from the URL, and
AUTHSVC_BREVO_WEBHOOK_AUTH holds the same (checked in constant time). Brevo's
`id` is the webhook's, not the event's, so an event is named by its kind,
message id, address and millisecond time; that time must be within the last
12 hours. `hard_bounce`, `invalid_email` and `spam` suppress `email`, when
the event is about an email authsvc sent to that address: the job's public id
in `X-Mailin-custom` (the header authsvc sends, which Brevo echoes), else the
`message-id`. The public id, not the message id, because a send answered
"key already used" records no Brevo message id. A batched webhook (a JSON
array) is read event by event.
"""

from __future__ import annotations

from typing import Any

from authsvc.bounces.notices import Malformed, Notice, Reading, SentMessage
from authsvc.bounces.schemes import (
    BATCH_BYTES,
    CredentialsReader,
    check_fresh,
    digest_id,
    notice,
    text_field,
)

WINDOW_SECONDS = 12 * 3600.0
SUPPRESSING_EVENTS = ("hard_bounce", "invalid_email", "spam")
# The header Brevo echoes in every event of the message: authsvc sends the job's public id.
CUSTOM_HEADER = "X-Mailin-custom"


class BrevoReader(CredentialsReader):
    name = "brevo"
    max_body_bytes = BATCH_BYTES

    def read_body(self, body: Any, now: float) -> Reading:
        events = body if isinstance(body, list) else [body]
        if not events or not all(isinstance(e, dict) and isinstance(e.get("event"), str)
                                 for e in events):
            raise Malformed("The body must be a Brevo event or a list of them.")
        return Reading([_notice(event, now) for event in events])


def _notice(event: dict[str, Any], now: float) -> Notice:
    kind = event["event"]
    millis = event.get("ts_epoch")
    seconds = event.get("ts_event")
    if isinstance(millis, int | float):
        when = millis / 1000
    elif isinstance(seconds, int | float):
        when = float(seconds)
    else:
        raise Malformed("A Brevo event needs its ts_epoch or ts_event.")
    check_fresh(when, now, window_seconds=WINDOW_SECONDS, what="the event's time")
    message_id = event.get("message-id")
    job = text_field(event, CUSTOM_HEADER)
    return notice(
        digest_id(kind, message_id, event.get("email"), millis if millis else seconds), kind,
        suppresses=[event.get("email")] if kind in SUPPRESSING_EVENTS else (),
        message_id=message_id, about=event.get("reason"),
        # A job sent under an already-used key has no Brevo message id to match.
        sent=SentMessage(public_job_id=job) if job else None)
