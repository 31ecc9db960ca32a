"""Mailgun's webhooks: `{"signature": {…}, "event-data": {…}}`, signed with HMAC.

`signature.signature` is the hex HMAC-SHA256 of `timestamp` + `token` under
the HTTP webhook signing key (AUTHSVC_MAILGUN_WEBHOOK_SIGNING_KEY), compared
in constant time; the timestamp must be within five minutes, and a token is
used once (Mailgun's own advice): the token is the notice's id. The signature
covers the timestamp and token, not the event, and the key is the account's:
whoever holds a fresh signed triple (another endpoint of the same account
receives them) can attach any event to it. So an event suppresses only when
both its message id and its `authsvc_job` user variable (the `v:` variable
authsvc sends) are those of an email authsvc sent to that recipient. A
`failed` event of severity `permanent` and a `complained` event suppress the
`recipient`.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from authsvc.bounces.notices import Incoming, Malformed, Notice, Reading, Refused, SentMessage
from authsvc.bounces.schemes import (
    ProviderReader,
    check_unix_time,
    event_name,
    json_body,
    notice,
    text_field,
)

WINDOW_SECONDS = 5 * 60.0


class MailgunReader(ProviderReader):
    name = "mailgun"

    def __init__(self, signing_key: str) -> None:
        self.signing_key = signing_key.encode()

    def read(self, incoming: Incoming, now: float) -> Reading:
        body = json_body(incoming)
        signature = body.get("signature") if isinstance(body, dict) else None
        if not isinstance(signature, dict):
            raise Refused("no signature object")
        timestamp, token, given = (signature.get(k) for k in ("timestamp", "token", "signature"))
        if not (isinstance(timestamp, str) and isinstance(token, str) and isinstance(given, str)):
            raise Refused("an incomplete signature object")
        expected = hmac.new(self.signing_key, (timestamp + token).encode(),
                            hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape")):
            raise Refused("the HMAC signature does not verify")
        check_unix_time(timestamp, now, window_seconds=WINDOW_SECONDS)
        assert isinstance(body, dict)
        data = body.get("event-data")
        if not isinstance(data, dict) or not isinstance(data.get("event"), str):
            raise Malformed("The body must carry one Mailgun event-data object.")
        return Reading([_notice(data, token)])


def _notice(data: dict[str, Any], token: str) -> Notice:
    kind = data["event"]
    suppresses = kind == "complained" or (kind == "failed" and data.get("severity") == "permanent")
    message = data.get("message")
    header_id = text_field(message.get("headers") if isinstance(message, dict) else None,
                           "message-id")
    message_id = f"<{header_id}>" if header_id else None
    job = text_field(data.get("user-variables"), "authsvc_job")
    # The signature does not cover the event: both ids must be those of a message
    # authsvc sent to the recipient, or the event names none of ours.
    sent = SentMessage(message_id, job) if message_id and job else SentMessage()
    return notice(
        f"token:{token}", event_name(kind, data.get("severity")),
        suppresses=[data.get("recipient")] if suppresses else (),
        message_id=message_id, about=data.get("delivery-status") or data.get("reason"),
        sent=sent)
