"""SendGrid's Event Webhook: a JSON array of events, signed with ECDSA.

`X-Twilio-Email-Event-Webhook-Signature` is a base64 DER ECDSA (P-256,
SHA-256) signature of the `…-Timestamp` header's value followed by the raw
body, under the verification key SendGrid shows (AUTHSVC_SENDGRID_WEBHOOK_
PUBLIC_KEY). The timestamp must be within five minutes, as Standard Webhooks
asks (SendGrid documents no window). Each event's id is its `sg_event_id`.
A `bounce` (unless its type is `blocked`, a temporary refusal), a
`spamreport`, and a `dropped` for an address SendGrid itself has on its
bounce or spam list suppress `email`.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key

from authsvc.bounces.notices import Incoming, Malformed, Notice, Reading, Refused
from authsvc.bounces.schemes import (
    BATCH_BYTES,
    ProviderReader,
    check_unix_time,
    digest_id,
    event_name,
    json_body,
    notice,
)

SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"
WINDOW_SECONDS = 5 * 60.0
DROPPED_SUPPRESSED = ("Bounced Address", "Spam Reporting Address", "Invalid")


class SendgridReader(ProviderReader):
    name = "sendgrid"
    max_body_bytes = BATCH_BYTES

    def __init__(self, public_key: str) -> None:
        key = load_der_public_key(base64.b64decode(public_key))
        assert isinstance(key, ec.EllipticCurvePublicKey)  # checked by config
        self.key = key

    def read(self, incoming: Incoming, now: float) -> Reading:
        signature = incoming.header(SIGNATURE_HEADER)
        timestamp = incoming.header(TIMESTAMP_HEADER)
        if not signature or not timestamp:
            raise Refused("no signature or timestamp header")
        try:
            raw_signature = base64.b64decode(signature, validate=True)
            self.key.verify(raw_signature, timestamp.encode() + incoming.body,
                            ec.ECDSA(hashes.SHA256()))
        except (binascii.Error, ValueError, InvalidSignature):
            raise Refused("the ECDSA signature does not verify") from None
        check_unix_time(timestamp, now, window_seconds=WINDOW_SECONDS)
        events = json_body(incoming)
        if not isinstance(events, list) or not all(
                isinstance(e, dict) and isinstance(e.get("event"), str) for e in events):
            raise Malformed("The body must be a list of SendGrid events.")
        return Reading([_notice(event) for event in events])


def _suppresses(event: dict[str, Any]) -> bool:
    kind = event["event"]
    if kind == "bounce":
        return event.get("type") != "blocked"
    if kind == "dropped":
        return event.get("reason") in DROPPED_SUPPRESSED
    return kind == "spamreport"


def _notice(event: dict[str, Any]) -> Notice:
    event_id = event.get("sg_event_id")
    message_id = event.get("sg_message_id")
    return notice(
        event_id if isinstance(event_id, str) and event_id else digest_id(event),
        event_name(event["event"], event.get("type")),
        suppresses=[event.get("email")] if _suppresses(event) else (),
        # The part before the first dot is the X-Message-Id the send answered.
        message_id=message_id.split(".", 1)[0] if isinstance(message_id, str) else None,
        about=event.get("reason"))
