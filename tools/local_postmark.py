"""A local mail provider in Postmark's API shape, for tests and the chaos harness.

`POST /email` as Postmark documents it: the `X-Postmark-Server-Token` header
(else 401, ErrorCode 10), a JSON body of the documented single-email fields
(anything else, or a missing From/To, is 422 ErrorCode 300), and
`{"To", "SubmittedAt", "MessageID", "ErrorCode": 0, "Message": "OK"}` on
success. Errors are `{"ErrorCode", "Message"}`; an address marked inactive
gets 422 ErrorCode 406. No idempotency key: every accepted request is a
delivery. Bounce and spam-complaint webhooks are Postmark's JSON records,
sent with the HTTP basic auth Postmark puts in the webhook URL.

`GET /server` (what `authsvc check` reads) answers the token's server as
Postmark documents it (ID, Name, ApiTokens, the hook URLs, ...), or 401
ErrorCode 10 for a wrong token, like the send.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any, ClassVar

from tools.local_provider import (
    Answer,
    LocalProvider,
    Message,
    Notification,
    Request,
    Unreadable,
    basic_auth,
    read_json_send,
)

DOCUMENTED_FIELDS = frozenset({
    "From", "To", "Cc", "Bcc", "Subject", "Tag", "HtmlBody", "TextBody", "ReplyTo",
    "Metadata", "Headers", "TrackOpens", "TrackLinks", "Attachments", "MessageStream",
})
ERROR_CODES = {401: 10, 422: 300, 429: 429, 500: 500, 503: 100}


class LocalPostmark(LocalProvider):
    name: ClassVar[str] = "postmark"

    def __init__(self, api_key: str = "pm-local-server-token", *,
                 webhook_user: str = "postmark-hook", webhook_password: str = "pm-hook-password-1",  # noqa: S107  (a fake's)
                 **options: Any) -> None:
        super().__init__(api_key, **options)
        self.webhook_user = webhook_user
        self.webhook_password = webhook_password
        self.inactive: set[str] = set()  # addresses Postmark refuses (ErrorCode 406)
        self._record_ids = itertools.count(4323372036854775807 - 10**6)

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/email"

    def authenticate(self, request: Request) -> Answer | None:
        if request.headers.get("x-postmark-server-token") != self.api_key:
            return _error(401, 10, "Request does not contain a valid Server token.")
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        if "application/json" not in request.headers.get("content-type", ""):
            return _error(415, 409, "JSON required.")
        body = read_json_send(request.raw, DOCUMENTED_FIELDS)
        if isinstance(body, Unreadable):
            if body.not_json:
                return _error(422, 402, "Received invalid JSON input.")
            if not body.unknown:
                return _error(422, 403, "Incompatible JSON input.")
            return _error(422, 300, f"Invalid email request: unknown fields {body.unknown}.")
        if not body.get("From") or not body.get("To"):
            return _error(422, 300, "Invalid email request: From and To are required.")
        if not body.get("TextBody") and not body.get("HtmlBody"):
            return _error(422, 300, "Provide either email TextBody or HtmlBody or both.")
        headers = body.get("Headers", [])
        if not isinstance(headers, list) or not all(
                isinstance(h, dict) and set(h) == {"Name", "Value"} for h in headers):
            return _error(422, 300, "Headers must be a list of Name/Value pairs.")
        to = tuple(a.strip() for a in str(body["To"]).split(","))
        inactive = [a for a in to if a.lower() in self.inactive]
        if inactive:
            return _error(422, 406, "You tried to send to recipient(s) that have been marked as"
                          f" inactive. Found inactive addresses: {', '.join(inactive)}.")
        job = next((h["Value"] for h in headers if h["Name"] == "X-Authsvc-Job"), None)
        return body, Message(to=to, subject=str(body.get("Subject", "")),
                             text=str(body.get("TextBody", "")),
                             html=str(body.get("HtmlBody", "")), public_job_id=job)

    def other(self, request: Request) -> Answer:
        """`GET /server`, read-only: the server the token belongs to."""
        if request.method != "GET" or request.path != "/server":
            return _error(404, 0, "The requested resource was not found.")
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        return Answer.json(200, {
            "ID": 23, "Name": "authsvc", "ApiTokens": [self.api_key], "Color": "blue",
            "SmtpApiActivated": True, "RawEmailEnabled": False, "DeliveryType": "Live",
            "ServerLink": "https://account.postmarkapp.com/servers/23/streams",
            "InboundAddress": "", "InboundHookUrl": "", "BounceHookUrl": "",
            "OpenHookUrl": "", "DeliveryHookUrl": "", "PostFirstOpenOnly": False,
            "InboundDomain": "", "InboundHash": "", "InboundSpamThreshold": 0,
            "TrackOpens": False, "TrackLinks": "None", "IncludeBounceContentInHook": True,
            "ClickHookUrl": "", "EnableSmtpApiErrorHooks": False})

    def accepted(self, message_id: str) -> Answer:
        return Answer.json(200, {"To": "", "SubmittedAt": _now(), "MessageID": message_id,
                                 "ErrorCode": 0, "Message": "OK"})

    def error(self, status: int, message: str) -> Answer:
        return _error(status, ERROR_CODES.get(status, 0), message)

    def coded_error(self, status: int, code: object, message: str) -> Answer:
        assert isinstance(code, int)  # Postmark's ErrorCode is a number
        return _error(status, code, message)

    # Webhooks: Postmark signs nothing; the credentials are in the webhook URL.
    def webhook_settings(self) -> dict[str, str]:
        return {"AUTHSVC_POSTMARK_WEBHOOK_AUTH": f"{self.webhook_user}:{self.webhook_password}"}

    def _record(self, record: dict[str, Any]) -> Notification:
        return Notification(json.dumps(record).encode(), {
            "Content-Type": "application/json",
            "Authorization": basic_auth(self.webhook_user, self.webhook_password)})

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "883953f4-6105-42a2-a16a-77a8eac79483",
               bounced_at: str | None = None, record_id: int | None = None) -> Notification:
        kind, code, name = (("HardBounce", 1, "Hard bounce") if hard
                            else ("SoftBounce", 4096, "Soft bounce"))
        return self._record({
            "RecordType": "Bounce", "MessageStream": "outbound",
            "ID": record_id if record_id is not None else next(self._record_ids),
            "Type": kind, "TypeCode": code, "Name": name, "Tag": "", "MessageID": message_id,
            "Metadata": {}, "ServerID": 23, "Description": "The server was unable to deliver"
            " your message (ex: unknown user, mailbox not found).",
            "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
            "Email": address, "From": "no-reply@example.com",
            "BouncedAt": bounced_at or _now(), "DumpAvailable": False, "Inactive": hard,
            "CanActivate": True, "Subject": "Reset your password"})

    def complaint(self, address: str, *,
                  message_id: str = "883953f4-6105-42a2-a16a-77a8eac79483") -> Notification:
        return self._record({
            "RecordType": "SpamComplaint", "MessageStream": "outbound",
            "ID": next(self._record_ids), "Type": "SpamComplaint", "TypeCode": 512,
            "Name": "Spam complaint", "Tag": "", "MessageID": message_id, "Metadata": {},
            "ServerID": 23, "Description": "", "Details": "Test spam complaint details",
            "Email": address, "From": "no-reply@example.com", "BouncedAt": _now(),
            "DumpAvailable": True, "Inactive": True, "CanActivate": False,
            "Subject": "Reset your password"})

    def delivery(self, address: str, *,
                 message_id: str = "883953f4-6105-42a2-a16a-77a8eac79483") -> Notification:
        return self._record({
            "RecordType": "Delivery", "ServerID": 23, "MessageStream": "outbound",
            "MessageID": message_id, "Recipient": address, "Tag": "",
            "DeliveredAt": _now(), "Details": "Test delivery webhook details", "Metadata": {}})


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _error(status: int, code: int, message: str) -> Answer:
    return Answer.json(status, {"ErrorCode": code, "Message": message})
