"""A local mail provider in Mailgun's Messages API shape, for tests and the chaos harness.

`POST /v3/DOMAIN/messages` as Mailgun documents it: HTTP basic auth `api`
and the key (else 401, plain text "Forbidden"), a multipart/form-data (or
urlencoded) body with from, to, subject and text or html (else 400
`{"message": …}`), custom headers as `h:NAME` and variables as `v:NAME`,
an unknown domain 404 `{"message": "Domain not found: …"}`, and
`{"id": "<…@DOMAIN>", "message": "Queued. Thank you."}` on success. No
idempotency key. Webhooks post `{"signature": {"timestamp", "token",
"signature"}, "event-data": {…}}`, the signature the hex HMAC-SHA256 of
timestamp + token under the webhook signing key.

`GET /v4/domains/NAME` (what `authsvc check` reads) answers the domain as
Mailgun documents it (`{"domain": {..., "state"}, "receiving_dns_records",
"sending_dns_records"}`), 404 `{"message": "Domain not found"}` for another
name, and 401 "Forbidden" for a wrong key, like the send.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from tools.local_provider import (
    SAMPLE_JOB,
    Answer,
    LocalProvider,
    Message,
    Notification,
    Request,
    basic_auth,
)


def read_form(content_type: str, raw: bytes) -> list[tuple[str, str]] | None:
    """The fields of a multipart/form-data or urlencoded body, in order; None if unreadable."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        return parse_qsl(raw.decode("utf-8"), keep_blank_values=True)
    if not content_type.startswith("multipart/form-data"):
        return None
    message = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    if not message.is_multipart():
        return None
    fields = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            return None
        fields.append((name, payload.decode("utf-8")))
    return fields


class LocalMailgun(LocalProvider):
    name: ClassVar[str] = "mailgun"

    def __init__(self, api_key: str = "key-local-test", *, domain: str = "mg.example.com",
                 signing_key: str = "mailgun-webhook-signing-key-0123", **options: Any) -> None:
        super().__init__(api_key, **options)
        self.domain = domain
        self.signing_key = signing_key

    @property
    def mail_url(self) -> str:
        return f"mailgun+http://{self.api_key}@127.0.0.1:{self.port}/{self.domain}"

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path.startswith("/v3/") and path.endswith("/messages")

    def authenticate(self, request: Request) -> Answer | None:
        if request.headers.get("authorization") != basic_auth("api", self.api_key):
            return Answer(401, b"Forbidden", content_type="text/plain")
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        domain = request.path.removeprefix("/v3/").removesuffix("/messages")
        if domain != self.domain:
            return _error(404, f"Domain not found: {domain}")
        try:
            fields = read_form(request.headers.get("content-type", ""), request.raw)
        except (UnicodeDecodeError, ValueError):
            fields = None
        if fields is None:
            return _error(400, "Bad request: the body is not a form")
        form: dict[str, list[str]] = {}
        for name, value in fields:
            form.setdefault(name, []).append(value)
        for required in ("from", "to", "subject"):
            if not form.get(required):
                return _error(400, f"{required} parameter is missing")
        if not (form.get("text") or form.get("html") or form.get("template")):
            return _error(400, "Need at least one of 'text', 'html' or 'template' parameters"
                          " specified")
        job = form.get("h:X-Authsvc-Job", [None])[0]
        return form, Message(to=tuple(form["to"]), subject=form["subject"][0],
                             text=form.get("text", [""])[0], html=form.get("html", [""])[0],
                             public_job_id=job)

    def other(self, request: Request) -> Answer:
        """`GET /v4/domains/NAME`, read-only: one domain's state and records."""
        if request.method != "GET" or not request.path.startswith("/v4/domains/"):
            return _error(404, "Not Found")
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        if request.path.removeprefix("/v4/domains/") != self.domain:
            return _error(404, "Domain not found")
        return Answer.json(200, {
            "domain": {"created_at": "Mon, 02 Nov 2026 10:00:00 GMT", "id": "6512f0b2c1d0",
                       "is_disabled": False, "name": self.domain, "require_tls": False,
                       "skip_verification": False, "smtp_login": f"postmaster@{self.domain}",
                       "spam_action": "disabled", "state": "active", "type": "custom",
                       "web_prefix": "email", "web_scheme": "https", "wildcard": False},
            "receiving_dns_records": [
                {"is_active": True, "cached": [], "priority": "10", "record_type": "MX",
                 "valid": "valid", "value": "mxa.mailgun.org"}],
            "sending_dns_records": [
                {"is_active": True, "cached": [], "name": self.domain, "record_type": "TXT",
                 "valid": "valid", "value": "v=spf1 include:mailgun.org ~all"}]})

    def new_message_id(self) -> str:
        return f"<{time.strftime('%Y%m%d%H%M%S')}.{secrets.token_hex(8)}@{self.domain}>"

    def accepted(self, message_id: str) -> Answer:
        return Answer.json(200, {"id": message_id, "message": "Queued. Thank you."})

    def error(self, status: int, message: str) -> Answer:
        if status == 401:
            return Answer(401, b"Forbidden", content_type="text/plain")
        return _error(status, message)

    # Webhooks, signed with the HTTP webhook signing key.
    def webhook_settings(self) -> dict[str, str]:
        return {"AUTHSVC_MAILGUN_WEBHOOK_SIGNING_KEY": self.signing_key}

    def sign(self, timestamp: str, token: str, key: str | None = None) -> str:
        return hmac.new((key or self.signing_key).encode(), (timestamp + token).encode(),
                        hashlib.sha256).hexdigest()

    def event(self, event_data: dict[str, Any], *, timestamp: int | None = None,
              token: str | None = None) -> Notification:
        when = str(timestamp if timestamp is not None else int(time.time()))
        token = token or secrets.token_hex(25)
        body = {"signature": {"timestamp": when, "token": token,
                              "signature": self.sign(when, token)},
                "event-data": event_data}
        return Notification(json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _data(self, event: str, address: str, message_id: str, job: str | None,
              **extra: Any) -> dict[str, Any]:
        # `v:` variables come back as `user-variables`: authsvc's job id is one of them.
        variables = {"authsvc_job": job} if job is not None else {}
        return {"event": event, "id": secrets.token_urlsafe(16), "timestamp": time.time(),
                "recipient": address, "recipient-domain": address.rpartition("@")[2],
                "message": {"headers": {"message-id": message_id.strip("<>"),
                                        "to": address, "subject": "Reset your password"}},
                "user-variables": variables,
                **extra}

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "<20261201080000.1a2b3c4d@mg.example.com>",
               job: str | None = SAMPLE_JOB) -> Notification:
        return self.event(self._data(
            "failed", address, message_id, job, severity="permanent" if hard else "temporary",
            reason="bounce" if hard else "generic",
            **{"delivery-status": {"code": 550 if hard else 452,
                                   "message": "No such user" if hard else "Mailbox full"}}))

    def complaint(self, address: str, *,
                  message_id: str = "<20261201080000.1a2b3c4d@mg.example.com>",
                  job: str | None = SAMPLE_JOB) -> Notification:
        return self.event(self._data("complained", address, message_id, job))

    def delivery(self, address: str, *,
                 message_id: str = "<20261201080000.1a2b3c4d@mg.example.com>",
                 job: str | None = SAMPLE_JOB) -> Notification:
        return self.event(self._data("delivered", address, message_id, job))


def _error(status: int, message: str) -> Answer:
    return Answer.json(status, {"message": message})
