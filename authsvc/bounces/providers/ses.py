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

from authsvc.bounces.notices import Incoming, Malformed, Notice, Reading
from authsvc.bounces.schemes import ProviderReader, event_name, json_body, notice
from authsvc.bounces.sns import SnsFetcher, pinned_subscribe_url, verify_message


class SesReader(ProviderReader):
    name = "ses"

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
            return Reading([notice(message_id, kind)], confirm_url=url)
        if kind != "Notification":
            return Reading([notice(message_id, kind)])
        try:
            event = json.loads(str(message.get("Message")))
        except (ValueError, RecursionError):
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
    addresses: list[object] = []
    part: object = None
    if kind == "Bounce":
        part = event.get("bounce")
        if isinstance(part, dict) and part.get("bounceType") == "Permanent":
            addresses = _recipients(part, "bouncedRecipients")
    elif kind == "Complaint":
        part = event.get("complaint")
        addresses = _recipients(part, "complainedRecipients")
    subtype = part.get("bounceType") if isinstance(part, dict) else None
    return notice(message_id, event_name(str(kind), subtype), suppresses=addresses,
                  message_id=ses_id, about=part)
