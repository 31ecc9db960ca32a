"""A local mail provider in Brevo's API shape, for tests and the chaos harness.

`POST /v3/smtp/email` as Brevo documents it: the `api-key` header (else 401
`unauthorized`), a JSON body of the documented fields with `sender`, `to`,
a subject and content, and `201 {"messageId": "<…>"}` on success. Errors are
`{"code", "message"}`. Its idempotency key is `headers.idempotencyKey` in
the body and must be a UUID (else 400 `invalid_parameter`); a key seen
within the last 15 minutes (Brevo's announced TTL; its guide now says 30) is
refused with 400 `duplicate_parameter` and nothing is sent again. A key is
remembered from the moment a message is accepted. Transactional webhooks
(hard_bounce, soft_bounce, spam, delivered) carry the token Brevo sends as
`Authorization: Bearer …` (or basic auth from the webhook URL).

`GET /v3/account` (what `authsvc check` reads) answers the account as Brevo
documents it (email, names, company, address, plan, relay), or 401
`unauthorized` "Key not found" for a wrong key, like the send.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from tools.local_provider import (
    Answer,
    LocalProvider,
    Message,
    Notification,
    Remembered,
    Request,
    Unreadable,
    read_json_send,
)

KEY_SECONDS = 15 * 60.0
DOCUMENTED_FIELDS = frozenset({
    "sender", "to", "bcc", "cc", "htmlContent", "textContent", "subject", "replyTo",
    "attachment", "headers", "templateId", "params", "messageVersions", "tags",
    "scheduledAt", "batchId",
})
ERROR_CODES = {400: "invalid_parameter", 401: "unauthorized", 402: "not_enough_credits",
               403: "permission_denied", 404: "document_not_found",
               429: "too_many_requests", 500: "internal_error"}


class LocalBrevo(LocalProvider):
    name: ClassVar[str] = "brevo"
    key_seconds: ClassVar[float | None] = KEY_SECONDS

    def __init__(self, api_key: str = "xkeysib-local-test-key", *,
                 webhook_token: str = "brevo-webhook-token-0123456789", **options: Any) -> None:  # noqa: S107  (a fake's)
        super().__init__(api_key, **options)
        self.webhook_token = webhook_token
        self._webhook_id = 1234567
        self._events = itertools.count(1)

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v3/smtp/email"

    def authenticate(self, request: Request) -> Answer | None:
        if request.headers.get("api-key") != self.api_key:
            return _error(401, "unauthorized", "Key not found")
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        body = read_json_send(request.raw, DOCUMENTED_FIELDS)
        if isinstance(body, Unreadable):
            if body.unknown:
                return _error(400, "invalid_parameter", f"unknown parameters: {body.unknown}")
            return _error(400, "bad_request", "Input must be a valid JSON object")
        sender, to = body.get("sender"), body.get("to")
        if not isinstance(sender, dict) or not sender.get("email"):
            return _error(400, "missing_parameter", "sender is missing")
        if not isinstance(to, list) or not to or not all(
                isinstance(t, dict) and t.get("email") for t in to):
            return _error(400, "missing_parameter", "to is missing")
        if not body.get("subject") or not (body.get("htmlContent") or body.get("textContent")):
            return _error(400, "missing_parameter", "subject and htmlContent are required")
        headers = body.get("headers", {})
        if not isinstance(headers, dict):
            return _error(400, "invalid_parameter", "headers must be an object")
        key = headers.get("idempotencyKey")
        if key is not None:
            try:
                uuid.UUID(str(key))
            except ValueError:
                return _error(400, "invalid_parameter", "idempotencyKey must be a UUID")
        job = headers.get("X-Authsvc-Job")
        return body, Message(to=tuple(str(t["email"]) for t in to), subject=str(body["subject"]),
                             text=str(body.get("textContent", "")),
                             html=str(body.get("htmlContent", "")),
                             public_job_id=job if isinstance(job, str) else None,
                             idempotency_key=str(key) if key is not None else None)

    def other(self, request: Request) -> Answer:
        """`GET /v3/account`, read-only: the key's account."""
        if request.method != "GET" or request.path != "/v3/account":
            return _error(404, "document_not_found", "Not found")
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        return Answer.json(200, {
            "organization_id": "6513d4e3b8f9a3f7e2c1d0a9", "user_id": 4032517,
            "email": "ops@example.com", "firstName": "Ops", "lastName": "Example",
            "companyName": "Example", "address": {
                "street": "1 Example Street", "city": "Paris", "zipCode": "75001",
                "country": "France"},
            "plan": [{"type": "free", "creditsType": "sendLimit", "credits": 300}],
            "relay": {"enabled": True, "data": {
                "userName": "ops@example.com", "relay": "smtp-relay.brevo.com", "port": 587}},
            "enterprise": False})

    def new_message_id(self) -> str:
        return f"<{time.strftime('%Y%m%d%H%M%S')}.{secrets.token_hex(6)}@smtp-relay.mailin.fr>"

    def accepted(self, message_id: str) -> Answer:
        return Answer.json(201, {"messageId": message_id})

    def error(self, status: int, message: str) -> Answer:
        answer = _error(status, ERROR_CODES.get(status, "internal_error"), message)
        if status == 429:
            answer = Answer(status, answer.body, {"x-sib-ratelimit-limit": "1000",
                                                  "x-sib-ratelimit-remaining": "0",
                                                  "x-sib-ratelimit-reset": "1"})
        return answer

    def repeated(self, remembered: Remembered, body_hash: str) -> Answer:
        # Brevo does not repeat the first answer: it refuses the key.
        return _error(400, "duplicate_parameter",
                      "idempotencyKey has already been used within its time to live")

    # Webhooks: Brevo signs nothing; it sends the configured bearer token.
    def webhook_settings(self) -> dict[str, str]:
        return {"AUTHSVC_BREVO_WEBHOOK_AUTH": self.webhook_token}

    def _event(self, event: str, address: str, message_id: str, job: str | None = None,
               **extra: Any) -> Notification:
        now = time.time() + next(self._events) / 1000  # distinct events, distinct times
        if job is not None:  # the X-Mailin-custom header of the send, echoed
            extra["X-Mailin-custom"] = job
        record = {
            "event": event, "email": address, "id": self._webhook_id,
            "date": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            "ts": int(now), "message-id": message_id, "ts_event": int(now),
            "subject": "Reset your password", "tag": "[\"authsvc\"]",
            "sending_ip": "185.41.28.109", "ts_epoch": int(now * 1000), **extra}
        return Notification(json.dumps(record).encode(), {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {self.webhook_token}"})

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "<202612010800.5787683@smtp-relay.mailin.fr>",
               job: str | None = None) -> Notification:
        return self._event("hard_bounce" if hard else "soft_bounce", address, message_id, job,
                           reason="550 5.1.1 mailbox does not exist")

    def complaint(self, address: str, *,
                  message_id: str = "<202612010800.5787683@smtp-relay.mailin.fr>",
                  job: str | None = None) -> Notification:
        return self._event("spam", address, message_id, job)

    def delivery(self, address: str, *,
                 message_id: str = "<202612010800.5787683@smtp-relay.mailin.fr>") -> Notification:
        return self._event("delivered", address, message_id)


def _error(status: int, code: str, message: str) -> Answer:
    return Answer.json(status, {"code": code, "message": message})
