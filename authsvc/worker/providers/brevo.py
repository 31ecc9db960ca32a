"""Brevo's transactional email: `POST /v3/smtp/email`, an `api-key` header, JSON.

The body is Brevo's documented fields (sender and to as objects, subject,
textContent, htmlContent, headers, tags). Its idempotency key is not an HTTP
header but `headers.idempotencyKey` in the body, and must be a UUID: a
UUIDv5 of the job's key (`authsvc-job-PUBLIC_ID`), so every attempt carries
the same one. Brevo remembers a key for 15 minutes (its announcement; its
guide says 30) and refuses a repeat within that time with 400
`duplicate_parameter` instead of sending again: that refusal means the first
request was accepted, so the job is sent (its provider id is the key: Brevo
does not repeat the first `messageId`; its webhook events are matched to the
job by the public id sent in `X-Mailin-custom`, which every event echoes).
After an unknown outcome the retry comes within half the window
(authsvc/worker/providers/http.py). Errors are
`{"code", "message"}`; 402 `not_enough_credits` is an account problem but a
4xx all the same: the job fails, visibly. A 429 says when to come back in
`x-sib-ratelimit-reset` (seconds), read when there is no `Retry-After`.
`authsvc check` reads the account (`GET /v3/account`, read-only).
"""

from __future__ import annotations

import uuid
from email.utils import parseaddr
from typing import Any, ClassVar

import httpx

from authsvc.worker.mailers import OutgoingEmail
from authsvc.worker.providers.http import HttpProviderMailer, json_field, retry_after_seconds

# Fixed forever: changing it would change every job's key mid-retry.
KEY_NAMESPACE = uuid.UUID("8d1f2f54-5b0e-5c55-9a55-2f0c1c3f4a10")
DUPLICATE_KEY_CODE = "duplicate_parameter"
KEY_WINDOW_SECONDS = 15 * 60.0  # the shorter of Brevo's two documented figures


def brevo_idempotency_key(email: OutgoingEmail) -> str:
    """The UUID Brevo takes: derived from the job's key, so the same on every attempt."""
    return str(uuid.uuid5(KEY_NAMESPACE, email.idempotency_key))


class BrevoMailer(HttpProviderMailer):
    name: ClassVar[str] = "brevo"
    path: ClassVar[str] = "/v3/smtp/email"
    idempotent: ClassVar[bool] = True
    idempotency_window_seconds: ClassVar[float | None] = KEY_WINDOW_SECONDS
    greeting_path: ClassVar[str] = "/v3/account"

    def auth_headers(self) -> dict[str, str]:
        return {"api-key": self.target.api_key}

    def idempotency_key(self, email: OutgoingEmail) -> str:
        return brevo_idempotency_key(email)

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        display, address = parseaddr(email.from_header or email.sender)
        sender: dict[str, str] = {"email": address or email.sender}
        if display:
            sender["name"] = display
        return {
            "sender": sender,
            "to": [{"email": email.recipient}],
            "subject": email.subject,
            "textContent": email.text,
            "htmlContent": email.html,
            # X-Mailin-custom comes back in every webhook event of this message: the
            # job's public id names it even when a duplicate answer gave no messageId.
            "headers": {**dict(email.headers), "X-Mailin-custom": str(email.public_job_id),
                        "idempotencyKey": self.idempotency_key(email)},
            "tags": ["authsvc"],
        }

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        return json_field(answer, "messageId")

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        message = json_field(answer, "message")
        code = json_field(answer, "code")
        if message:
            return f"{code}: {message}" if code else message
        return text

    def retry_after(self, response: httpx.Response) -> float | None:
        # Brevo's rate-limit answer says when in seconds, in its own header.
        wait = retry_after_seconds(response.headers.get("Retry-After"))
        return wait if wait is not None else retry_after_seconds(
            response.headers.get("x-sib-ratelimit-reset"))

    def already_accepted(self, response: httpx.Response, answer: Any) -> bool:
        # We send one recipient and one key, so a duplicate can only be the key.
        return response.status_code == 400 and json_field(answer, "code") == DUPLICATE_KEY_CODE
