"""Resend's API shape: `POST /emails`, a bearer key, a JSON body, `Idempotency-Key`.

The fields sent are Resend's documented body parameters (from, to, subject,
text, html, headers, tags); the answer's `id` becomes the job's
provider_message_id. Resend keeps an idempotency key for 24 hours and answers
a repeated key with the first result, so a retry after a crash or a timeout
does not deliver twice. Errors come as `{"statusCode", "name", "message"}`;
409 `concurrent_idempotent_requests` (the first request with this key is
still running) is worth retrying, any other 409 (`invalid_idempotent_request`:
the same key with another body) is not.

`authsvc check` lists the domains (`GET /domains`, read-only). A key made
with "sending access" only is refused there with 401 `restricted_api_key`:
Resend knows the key, so the check says so instead of failing it. An
unknown key is 403 `invalid_api_key`; one version of Resend's error reference
has the endpoints other than sending answer it 400 `validation_error` "API
key is invalid", which the check takes as a refused key too.
"""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from authsvc.worker.mailers import OutgoingEmail
from authsvc.worker.providers.http import HttpProviderMailer, json_field

RETRYABLE_CONFLICTS = frozenset({"concurrent_idempotent_requests"})
SENDING_ONLY_KEY = "restricted_api_key"


class ResendMailer(HttpProviderMailer):
    name: ClassVar[str] = "resend"
    path: ClassVar[str] = "/emails"
    idempotent: ClassVar[bool] = True
    idempotency_header: ClassVar[str | None] = "Idempotency-Key"
    idempotency_window_seconds: ClassVar[float | None] = 24 * 3600.0
    greeting_path: ClassVar[str] = "/domains"

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        body: dict[str, Any] = {
            "from": email.from_header or email.sender,
            "to": [email.recipient],
            "subject": email.subject,
            "text": email.text,
            "html": email.html,
            "tags": [{"name": "authsvc_job", "value": str(email.public_job_id)}],
        }
        if email.headers:
            body["headers"] = dict(email.headers)
        return body

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        return json_field(answer, "id")

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        if isinstance(answer, dict) and isinstance(answer.get("message"), str):
            name = answer.get("name")
            return f"{name}: {answer['message']}" if isinstance(name, str) else answer["message"]
        return text

    def retryable_refusal(self, response: httpx.Response, answer: Any) -> bool:
        return (response.status_code == 409
                and json_field(answer, "name") in RETRYABLE_CONFLICTS)  # a string, or None

    def greeting_answer(self, answer: Any) -> tuple[bool, str]:
        domains = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(domains, list):
            return True, ""
        names = [d.get("name") for d in domains if isinstance(d, dict)]
        listed = ", ".join(str(n) for n in names[:5]) + (", …" if len(names) > 5 else "")
        counted = f"{len(names)} domain" + ("" if len(names) == 1 else "s")
        return True, f"{counted}{': ' + listed if names else ''}"

    def key_refused(self, response: httpx.Response, answer: Any) -> bool:
        message = answer.get("message") if isinstance(answer, dict) else None
        return super().key_refused(response, answer) or (
            response.status_code == 400 and isinstance(message, str)
            and "api key is invalid" in message.lower())

    def key_only_restricted(self, response: httpx.Response, answer: Any) -> str | None:
        if isinstance(answer, dict) and answer.get("name") == SENDING_ONLY_KEY:
            return "a sending-only key: it cannot list domains"
        return None
