"""A local mail provider in SendGrid's v3 Mail Send shape, for tests and the chaos harness.

`POST /v3/mail/send` as SendGrid documents it: a bearer key (else 401), a
JSON body of the documented fields with personalizations, `from` as an
object and `content` with text/plain first (else 400 with SendGrid's
`{"errors": [{"message", "field", "help"}]}`), and `202` with an empty body
and the id in `X-Message-Id` on success. A 429 carries the rate-limit
headers (`X-RateLimit-Limit`, `-Remaining`, `-Reset` as a Unix time). No
idempotency key. The Event Webhook posts a JSON array of events, signed
with ECDSA P-256 over timestamp + body (`X-Twilio-Email-Event-Webhook-
Signature`, base64 DER; `…-Timestamp`); the verification key is the public
key, base64 DER, as SendGrid's settings page shows it.

`GET /v3/scopes` (what `authsvc check` reads) answers `{"scopes": [...]}`,
the key's own (`scopes=`; `mail.send` among them by default), or 401 with
SendGrid's errors for a wrong key, like the send.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any, ClassVar

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tools.local_provider import (
    Answer,
    LocalProvider,
    Message,
    Notification,
    Request,
    Unreadable,
    read_json_send,
)

DOCUMENTED_FIELDS = frozenset({
    "personalizations", "from", "reply_to", "reply_to_list", "subject", "content",
    "attachments", "template_id", "headers", "categories", "custom_args", "send_at",
    "batch_id", "asm", "ip_pool_name", "mail_settings", "tracking_settings",
})
SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"


class LocalSendgrid(LocalProvider):
    name: ClassVar[str] = "sendgrid"

    def __init__(self, api_key: str = "SG.local-test-key", *,
                 scopes: tuple[str, ...] = ("mail.send", "mail.batch.read", "user.profile.read"),
                 **options: Any) -> None:
        super().__init__(api_key, **options)
        self.signing_key = ec.generate_private_key(ec.SECP256R1())
        self.scopes = scopes  # what the key was given, for GET /v3/scopes

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v3/mail/send"

    def authenticate(self, request: Request) -> Answer | None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _errors(401, "The provided authorization grant is invalid, expired, or"
                           " revoked")
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        body = read_json_send(request.raw, DOCUMENTED_FIELDS)
        if isinstance(body, Unreadable):
            if body.unknown:
                return _errors(400, f"unknown fields {body.unknown}", field=body.unknown[0])
            return _errors(400, "Bad Request", field=None)
        personalizations = body.get("personalizations")
        if not isinstance(personalizations, list) or not personalizations:
            return _errors(400, "The personalizations field is required and must have at"
                           " least one personalization.", field="personalizations")
        to = [t.get("email") for p in personalizations if isinstance(p, dict)
              for t in p.get("to", []) if isinstance(t, dict)]
        if not to or not all(isinstance(t, str) and t for t in to):
            return _errors(400, "The to array is required for all personalization objects,"
                           " and must have at least one email object with a valid email"
                           " address.", field="personalizations.0.to")
        sender = body.get("from")
        if not isinstance(sender, dict) or not sender.get("email"):
            return _errors(400, "The from object must be provided for every email send. It is"
                           " an object that requires the email parameter, but may also"
                           " contain a name parameter.", field="from")
        if not body.get("subject"):
            return _errors(400, "The subject is required.", field="subject")
        content = body.get("content")
        if not isinstance(content, list):
            content = []
        types = [c.get("type") for c in content if isinstance(c, dict)]
        if not types:
            return _errors(400, "Unless a valid template_id is provided, the content parameter"
                           " is required.", field="content")
        if "text/plain" in types and types[0] != "text/plain":
            return _errors(400, "If present, text/plain must be first, followed by text/html,"
                           " followed by any other content.", field="content")
        values = {c["type"]: str(c.get("value", "")) for c in content if isinstance(c, dict)}
        headers = body.get("headers", {})
        job = headers.get("X-Authsvc-Job") if isinstance(headers, dict) else None
        return body, Message(to=tuple(str(t) for t in to), subject=str(body["subject"]),
                             text=values.get("text/plain", ""), html=values.get("text/html", ""),
                             public_job_id=job if isinstance(job, str) else None)

    def other(self, request: Request) -> Answer:
        """`GET /v3/scopes`, read-only: the scopes of the key that asks."""
        if request.method != "GET" or request.path != "/v3/scopes":
            return _errors(404, "not found")
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        return Answer.json(200, {"scopes": list(self.scopes)})

    def new_message_id(self) -> str:
        return secrets.token_urlsafe(16)[:22]

    def accepted(self, message_id: str) -> Answer:
        return Answer(202, b"", {"X-Message-Id": message_id}, content_type="text/plain")

    def error(self, status: int, message: str) -> Answer:
        answer = _errors(status, message)
        if status == 429:
            reset = str(int(time.time()) + 1)
            answer = Answer(status, answer.body, {"X-RateLimit-Limit": "600",
                                                  "X-RateLimit-Remaining": "0",
                                                  "X-RateLimit-Reset": reset})
        return answer

    # The Event Webhook, signed.
    @property
    def public_key(self) -> str:
        der = self.signing_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(der).decode()

    def webhook_settings(self) -> dict[str, str]:
        return {"AUTHSVC_SENDGRID_WEBHOOK_PUBLIC_KEY": self.public_key}

    def events(self, events: list[dict[str, Any]], *, timestamp: int | None = None
               ) -> Notification:
        body = json.dumps(events).encode()
        when = str(timestamp if timestamp is not None else int(time.time()))
        signature = self.signing_key.sign(when.encode() + body, ec.ECDSA(hashes.SHA256()))
        return Notification(body, {"Content-Type": "application/json",
                                   SIGNATURE_HEADER: base64.b64encode(signature).decode(),
                                   TIMESTAMP_HEADER: when})

    @staticmethod
    def event(kind: str, address: str, message_id: str, **extra: Any) -> dict[str, Any]:
        return {"email": address, "timestamp": int(time.time()), "event": kind,
                "sg_event_id": secrets.token_urlsafe(16),
                "sg_message_id": f"{message_id}.filterdrecv-p3mdw1-5F5FC76C-9.0",
                "smtp-id": f"<{message_id}@ismtpd0001p1lon1.sendgrid.net>",
                "authsvc_job": "00000000-0000-0000-0000-000000000000", **extra}

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "14c5d75ce93dfb1ab2e2") -> Notification:
        return self.events([self.event(
            "bounce", address, message_id, type="bounce" if hard else "blocked",
            status="5.1.1" if hard else "4.0.0",
            reason="550 5.1.1 The email account that you tried to reach does not exist.")])

    def complaint(self, address: str, *, message_id: str = "14c5d75ce93dfb1ab2e2"
                  ) -> Notification:
        return self.events([self.event("spamreport", address, message_id)])

    def delivery(self, address: str, *, message_id: str = "14c5d75ce93dfb1ab2e2"
                 ) -> Notification:
        return self.events([self.event("delivered", address, message_id,
                                       response="250 OK")])


def _errors(status: int, message: str, field: str | None = None) -> Answer:
    return Answer.json(status, {"errors": [{"message": message, "field": field, "help": None}]})
