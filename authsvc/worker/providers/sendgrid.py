"""SendGrid's v3 Mail Send: `POST /v3/mail/send`, a bearer key, personalizations.

The body is the documented v3 shape: one personalization with the
recipient, `from` as an object, `content` with text/plain before text/html
(SendGrid's required order), the X-Authsvc-* headers, and the job's public
id as a custom arg (it comes back in every event of the Event Webhook).
SendGrid answers 202 with an empty body and the message id in the
`X-Message-Id` header; a 2xx without that header is an unknown outcome.
Errors are `{"errors": [{"message", "field", "help"}]}`; a 429 says when to
come back in `X-RateLimit-Reset` (a Unix time), read when there is no
`Retry-After`. SendGrid takes no idempotency key: a lost answer is ambiguous
(docs/providers.md). `authsvc check` asks the key's own scopes (`GET
/v3/scopes`, read-only, allowed to every key): a key without `mail.send`
fails the check, since it would fail every email.
"""

from __future__ import annotations

from email.utils import parseaddr
from typing import Any, ClassVar

import httpx

from authsvc.worker.mailers import OutgoingEmail
from authsvc.worker.providers.http import (
    HttpProviderMailer,
    retry_after_seconds,
    unix_time_wait,
)

SEND_SCOPE = "mail.send"


class SendgridMailer(HttpProviderMailer):
    name: ClassVar[str] = "sendgrid"
    path: ClassVar[str] = "/v3/mail/send"
    greeting_path: ClassVar[str] = "/v3/scopes"

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        display, address = parseaddr(email.from_header or email.sender)
        sender: dict[str, str] = {"email": address or email.sender}
        if display:
            sender["name"] = display
        body: dict[str, Any] = {
            "personalizations": [{"to": [{"email": email.recipient}]}],
            "from": sender,
            "subject": email.subject,
            "content": [{"type": "text/plain", "value": email.text},
                        {"type": "text/html", "value": email.html}],
            "custom_args": {"authsvc_job": str(email.public_job_id)},
            # Opens and clicks would rewrite the link we mint: keep it as sent.
            "tracking_settings": {"click_tracking": {"enable": False},
                                  "open_tracking": {"enable": False}},
        }
        if email.headers:
            body["headers"] = dict(email.headers)
        return body

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        value = response.headers.get("X-Message-Id", "").strip()
        return value or None

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        errors = answer.get("errors") if isinstance(answer, dict) else None
        if isinstance(errors, list):
            parts = []
            for error in errors:
                if isinstance(error, dict) and isinstance(error.get("message"), str):
                    field = error.get("field")
                    parts.append(f"{field}: {error['message']}" if isinstance(field, str)
                                 else error["message"])
            if parts:
                return "; ".join(parts)
        return text

    def greeting_answer(self, answer: Any) -> tuple[bool, str]:
        scopes = answer.get("scopes") if isinstance(answer, dict) else None
        if not isinstance(scopes, list):
            return True, ""
        if SEND_SCOPE not in scopes:
            return False, f"it lacks the {SEND_SCOPE} scope (it has {len(scopes)} other(s))"
        return True, f"{SEND_SCOPE} among its {len(scopes)} scope(s)"

    def retry_after(self, response: httpx.Response) -> float | None:
        wait = retry_after_seconds(response.headers.get("Retry-After"))
        return wait if wait is not None else unix_time_wait(
            response.headers.get("X-RateLimit-Reset"))
