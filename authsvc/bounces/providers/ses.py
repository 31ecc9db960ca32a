"""Amazon SES's bounce and complaint notifications, delivered by Amazon SNS.

The SNS envelope is verified by authsvc/bounces/sns.py (configured topic,
pinned certificate URL, RSA signature, a timestamp within the hour); its
`MessageId` is the notice's id. A `SubscriptionConfirmation` is confirmed by
fetching its (pinned) SubscribeURL. The `Message` is an SES notification
(`notificationType`) or an event published by a configuration set
(`eventType`): a `Bounce` whose bounceType is `Permanent` suppresses each
bounced recipient, a `Complaint` each complaining one; anything else is
acknowledged.
"""

from __future__ import annotations

import json
from typing import Any

from authsvc.bounces.notices import (
    ONE_EVENT_BYTES,
    Incoming,
    Malformed,
    Notice,
    Reading,
    canonical_addresses,
    detail,
    json_body,
)
from authsvc.bounces.sns import SnsFetcher, pinned_subscribe_url, verify_message


class SesReader:
    name = "ses"
    max_body_bytes = ONE_EVENT_BYTES

    def __init__(self, topic_arns: tuple[str, ...], fetcher: SnsFetcher | None = None) -> None:
        self.topic_arns = topic_arns
        self.fetcher = fetcher or SnsFetcher()

    def read(self, incoming: Incoming, now: float) -> Reading:
        message = json_body(incoming)
        if not isinstance(message, dict):
            raise Malformed("The body must be an SNS message.")
        verify_message(message, self.topic_arns, self.fetcher, now)
        message_id = str(message.get("MessageId"))
        kind = message["Type"]
        if kind == "SubscriptionConfirmation":
            url = pinned_subscribe_url(message.get("SubscribeURL"), str(message["TopicArn"]))
            return Reading([Notice(id=message_id, event=kind)], confirm_url=url)
        if kind != "Notification":
            return Reading([Notice(id=message_id, event=kind)])
        try:
            event = json.loads(str(message.get("Message")))
        except ValueError:
            raise Malformed("The SNS Message is not an SES notification.") from None
        if not isinstance(event, dict):
            raise Malformed("The SNS Message is not an SES notification.")
        return Reading([_notice(message_id, event)])

    def confirm(self, url: str) -> None:
        self.fetcher.confirm(url)


def _recipients(part: object, key: str) -> list[object]:
    found = part.get(key) if isinstance(part, dict) else None
    return [r.get("emailAddress") for r in found if isinstance(r, dict)] \
        if isinstance(found, list) else []


def _notice(message_id: str, event: dict[str, Any]) -> Notice:
    kind = event.get("notificationType") or event.get("eventType")
    mail = event.get("mail")
    ses_id = mail.get("messageId") if isinstance(mail, dict) else None
    addresses: tuple[str, ...] = ()
    part: object = None
    if kind == "Bounce":
        part = event.get("bounce")
        if isinstance(part, dict) and part.get("bounceType") == "Permanent":
            addresses = canonical_addresses(_recipients(part, "bouncedRecipients"))
    elif kind == "Complaint":
        part = event.get("complaint")
        addresses = canonical_addresses(_recipients(part, "complainedRecipients"))
    subtype = part.get("bounceType") if isinstance(part, dict) else None
    return Notice(id=message_id, event=f"{kind}/{subtype}" if subtype else str(kind),
                  addresses=addresses,
                  provider_message_id=ses_id if isinstance(ses_id, str) else None,
                  detail=detail(part))
