"""Postmark's API shape: `POST /email`, `X-Postmark-Server-Token`, PascalCase JSON.

The body is Postmark's documented single-email fields (From, To, Subject,
TextBody, HtmlBody, Headers as Name/Value pairs, MessageStream, Metadata);
the answer's `MessageID` becomes the job's provider_message_id, and only an
answer with `ErrorCode` 0 is an acceptance. Refusals come as
`{"ErrorCode", "Message"}`, mostly with 422: they fail the job (406, an
inactive recipient, is Postmark's own suppression of a bounced or complaining
address) except code 100, "Maintenance", which is retried. Postmark takes no
idempotency key: a lost answer is ambiguous (docs/providers.md).
`authsvc check` reads the token's server (`GET /server`, read-only).
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from authsvc.worker.mailers import OutgoingEmail
from authsvc.worker.providers.http import HttpProviderMailer, json_field

RETRYABLE_ERROR_CODES = frozenset({100})  # "Maintenance"
DEFAULT_STREAM = "outbound"


class PostmarkMailer(HttpProviderMailer):
    name: ClassVar[str] = "postmark"
    path: ClassVar[str] = "/email"
    greeting_path: ClassVar[str] = "/server"

    def auth_headers(self) -> dict[str, str]:
        return {"X-Postmark-Server-Token": self.target.api_key}

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        return {
            "From": email.from_header or email.sender,
            "To": email.recipient,
            "Subject": email.subject,
            "TextBody": email.text,
            "HtmlBody": email.html,
            "Headers": [{"Name": name, "Value": value} for name, value in email.headers],
            "MessageStream": self.target.option("message_stream") or DEFAULT_STREAM,
            "Metadata": {"authsvc_job": str(email.public_job_id)},
            "TrackOpens": False,
        }

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        if not isinstance(answer, dict) or answer.get("ErrorCode") != 0:
            return None
        return json_field(answer, "MessageID")

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        if isinstance(answer, dict) and isinstance(answer.get("Message"), str):
            return f"ErrorCode {answer.get('ErrorCode')}: {answer['Message']}"
        return text

    def retryable_refusal(self, response: httpx.Response, answer: Any) -> bool:
        code = answer.get("ErrorCode") if isinstance(answer, dict) else None
        # Only a number can be one (a list or an object is not even hashable).
        return isinstance(code, int) and code in RETRYABLE_ERROR_CODES

    def greeting_answer(self, answer: Any) -> tuple[bool, str]:
        # The answer also lists the server's tokens: only its name is said.
        name = json_field(answer, "Name")
        return True, f"server {name!r}" if name else ""
