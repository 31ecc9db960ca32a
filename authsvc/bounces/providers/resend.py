"""Resend's notifications: Svix messages, i.e. Standard Webhooks.

Headers `svix-id`/`svix-timestamp`/`svix-signature` (or the `webhook-*`
spellings) and a v1 HMAC-SHA256 signature of "id.timestamp.body" under the
`whsec_` secret, checked by the `standardwebhooks` package, which also
refuses timestamps more than five minutes off. The notice id is the message
id. `email.bounced` (unless its bounce type is Transient or Undetermined)
and `email.complained` suppress the recipients.
"""

from __future__ import annotations

from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from authsvc.bounces.notices import Incoming, Malformed, Reading, Refused
from authsvc.bounces.schemes import ProviderReader, json_body, notice

SUPPRESSING_EVENTS = ("email.bounced", "email.complained")
# Bounce types that do not mean "this address will never take mail".
SOFT_BOUNCE_TYPES = ("transient", "undetermined")
_HEADER_NAMES = ("id", "timestamp", "signature")


class ResendReader(ProviderReader):
    name = "resend"

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def read(self, incoming: Incoming, now: float) -> Reading:
        headers = {}
        for part in _HEADER_NAMES:
            value = incoming.header(f"webhook-{part}") or incoming.header(f"svix-{part}")
            if value:
                headers[f"webhook-{part}"] = value
        try:
            Webhook(self.secret).verify(incoming.body, headers, json_parse=False)
        except (WebhookVerificationError, ValueError) as exc:
            # ValueError: a malformed signature list (binascii) or a body that is not UTF-8.
            raise Refused(str(exc) or type(exc).__name__) from None
        event = json_body(incoming)
        if not isinstance(event, dict):
            raise Malformed("The event must be a JSON object.")
        data: dict[str, Any] = event["data"] if isinstance(event.get("data"), dict) else {}
        return Reading([notice(
            headers["webhook-id"], str(event.get("type")), suppresses=_suppressed(event, data),
            message_id=data.get("email_id"), about=data.get("bounce") or data.get("complaint"))])


def _suppressed(event: dict[str, Any], data: dict[str, Any]) -> list[object]:
    kind = event.get("type")
    if kind not in SUPPRESSING_EVENTS:
        return []
    if kind == "email.bounced":
        bounce = data.get("bounce")
        bounce_type = bounce.get("type") if isinstance(bounce, dict) else None
        if isinstance(bounce_type, str) and bounce_type.lower() in SOFT_BOUNCE_TYPES:
            return []
    to = data.get("to")
    return [to] if isinstance(to, str) else to if isinstance(to, list) else []
