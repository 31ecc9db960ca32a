"""A local mail provider in Resend's API shape, for tests and the chaos harness.

It answers `POST /emails` as Resend documents it: a bearer key, a JSON body of
the documented fields (anything else is a 422), `{"id": …}` on success, and
`Idempotency-Key`: a key seen in the last 24 hours gets the first answer
again without a second delivery; the same key with another body gets 409
`invalid_idempotent_request`, and while the first request with a key is
still being answered, 409 `concurrent_idempotent_requests`. Errors are
`{"statusCode", "name", "message"}`. Faults and the accept hook:
tools/local_provider.py. Webhook events (email.bounced, email.complained,
email.delivered) are Svix messages signed under the fake's `whsec_` secret.

`GET /domains` (what `authsvc check` reads) answers `{"object": "list",
"has_more": false, "data": [...]}` to a full-access key, 401
`restricted_api_key` to a sending-only one (`full_access=False`) and 403
`invalid_api_key` to an unknown key, as Resend's error reference lists them.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from standardwebhooks.webhooks import Webhook

from tools.local_provider import (
    Answer,
    Delivered,
    FaultRates,
    LocalProvider,
    Message,
    Notification,
    Remembered,
    Request,
)

__all__ = ["DOCUMENTED_FIELDS", "Delivered", "FaultRates", "LocalResend"]

DEDUP_SECONDS = 24 * 3600.0
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"local-resend-webhooks-32-bytes!").decode()
DOCUMENTED_FIELDS = frozenset({
    "from", "to", "subject", "bcc", "cc", "reply_to", "html", "text", "headers",
    "attachments", "tags", "scheduled_at", "template", "topic_id",
})
REQUIRED_FIELDS = ("from", "to", "subject")
# Resend's error names by status, for injected failures.
ERROR_NAMES = {400: "validation_error", 401: "missing_api_key", 403: "invalid_api_key",
               404: "not_found", 408: "request_timeout", 409: "invalid_idempotent_request",
               422: "validation_error", 429: "rate_limit_exceeded"}


class LocalResend(LocalProvider):
    name: ClassVar[str] = "resend"
    key_seconds: ClassVar[float | None] = DEDUP_SECONDS

    def __init__(self, api_key: str = "re_local_test_key", *,
                 webhook_secret: str = WEBHOOK_SECRET, full_access: bool = True,
                 domain: str = "example.com", **options: Any) -> None:
        super().__init__(api_key, **options)
        self.webhook_secret = webhook_secret
        self.full_access = full_access  # False: a key with "sending access" only
        self.domain = domain

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/emails"

    def authenticate(self, request: Request) -> Answer | None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "invalid_api_key", "API key is invalid")
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        try:
            body = json.loads(request.raw)
        except ValueError:
            return _error(422, "validation_error", "body is not JSON")
        problem = _validate(body)
        if problem:
            return _error(422, "validation_error", problem)
        to = body["to"]
        job = body.get("headers", {}).get("X-Authsvc-Job")
        return body, Message(
            to=tuple([to] if isinstance(to, str) else to), subject=str(body["subject"]),
            text=str(body.get("text", "")), html=str(body.get("html", "")),
            public_job_id=job if isinstance(job, str) and job else None,
            idempotency_key=request.headers.get("idempotency-key"))

    def accepted(self, message_id: str) -> Answer:
        return Answer.json(200, {"id": message_id})

    def other(self, request: Request) -> Answer:
        """`GET /domains`, read-only: what a full-access key may list."""
        if request.method != "GET" or request.path != "/domains":
            return _error(404, "not_found", "The requested endpoint does not exist.")
        if "authorization" not in request.headers:
            return _error(401, "missing_api_key", "Missing API key in the authorization header")
        if request.headers["authorization"] != f"Bearer {self.api_key}":
            return _error(403, "invalid_api_key", "API key is invalid")
        if not self.full_access:
            return _error(401, "restricted_api_key",
                          "This API key is restricted to only send emails")
        return Answer.json(200, {"object": "list", "has_more": False, "data": [{
            "id": "d91cd9bd-1176-453e-8fc1-35364d380206", "name": self.domain,
            "status": "verified", "created_at": "2026-04-26 20:21:26.347412+00",
            "region": "us-east-1", "capabilities": {"sending": "enabled",
                                                    "receiving": "disabled"}}]})

    def error(self, status: int, message: str) -> Answer:
        return _error(status, ERROR_NAMES.get(status, "internal_server_error"), message)

    def repeated(self, remembered: Remembered, body_hash: str) -> Answer:
        if remembered.body_hash != body_hash:
            return _error(409, "invalid_idempotent_request",
                          "same idempotency key used with a different body")
        if remembered.answer is None or not remembered.done.is_set():
            return _error(409, "concurrent_idempotent_requests",
                          "another request with this idempotency key is in progress")
        return remembered.answer


    # Webhooks: Svix messages (Standard Webhooks).
    def webhook_settings(self) -> dict[str, str]:
        return {"AUTHSVC_PROVIDER_WEBHOOK_SECRET": self.webhook_secret}

    def event(self, kind: str, data: dict[str, Any], *, when: datetime | None = None,
              msg_id: str | None = None) -> Notification:
        body = json.dumps({"type": kind, "created_at": _now(), "data": data})
        when = when or datetime.now(UTC)
        msg_id = msg_id or f"msg_{uuid.uuid4().hex[:24]}"
        signature = Webhook(self.webhook_secret).sign(msg_id, when, body)
        return Notification(body.encode(), {
            "Content-Type": "application/json", "svix-id": msg_id,
            "svix-timestamp": str(int(when.timestamp())), "svix-signature": signature})

    def _data(self, address: str, message_id: str, **extra: Any) -> dict[str, Any]:
        return {"email_id": message_id, "to": [address], "from": "no-reply@example.com",
                "subject": "Reset your password", "created_at": _now(), **extra}

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "4ef9a417-02e9-4d39-ad75-9611e0fcc33c") -> Notification:
        bounce = {"type": "Permanent" if hard else "Transient", "subType": "General",
                  "message": "The recipient's mailbox does not exist."}
        return self.event("email.bounced", self._data(address, message_id, bounce=bounce))

    def complaint(self, address: str, *,
                  message_id: str = "4ef9a417-02e9-4d39-ad75-9611e0fcc33c") -> Notification:
        return self.event("email.complained", self._data(address, message_id))

    def delivery(self, address: str, *,
                 message_id: str = "4ef9a417-02e9-4d39-ad75-9611e0fcc33c") -> Notification:
        return self.event("email.delivered", self._data(address, message_id))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error(status: int, name: str, message: str) -> Answer:
    return Answer.json(status, {"statusCode": status, "name": name, "message": message})


def _validate(body: object) -> str | None:
    if not isinstance(body, dict):
        return "body must be a JSON object"
    unknown = sorted(set(body) - DOCUMENTED_FIELDS)
    if unknown:
        return f"unknown fields: {unknown}"
    missing = [f for f in REQUIRED_FIELDS if not body.get(f)]
    if missing:
        return f"missing required fields: {missing}"
    if "html" not in body and "text" not in body and "template" not in body:
        return "one of html, text or template is required"
    to = body["to"]
    if not (isinstance(to, str) or (isinstance(to, list) and all(isinstance(t, str) for t in to))):
        return "to must be a string or an array of strings"
    headers = body.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return "headers must be an object of strings"
    return None
