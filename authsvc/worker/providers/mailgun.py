"""Mailgun's Messages API: `POST /v3/DOMAIN/messages`, basic auth `api:KEY`, a form.

The request is multipart/form-data as documented (from, to, subject, text,
html; custom headers as `h:NAME`, the job's public id as the user variable
`v:authsvc_job`, which comes back in every webhook event). The answer's `id`
(`<…@DOMAIN>`) becomes the job's provider_message_id. Errors are
`{"message": …}` (a 401 is plain text); 429 and 5xx are retried, Mailgun's
docs say a 404 of an unknown domain can be temporary but the domain is
configuration, so it fails the job like any other 4xx. Mailgun takes no
idempotency key: a lost answer is ambiguous (docs/providers.md).

`authsvc check` reads the sending domain (`GET /v4/domains/DOMAIN`,
read-only): the key and the domain at once. A Domain Sending Key may only
post messages, so Mailgun refuses it there: the check needs the account's
API key (docs/providers.md).
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar

import httpx

from authsvc.worker.mailers import OutgoingEmail
from authsvc.worker.providers.http import HttpProviderMailer, json_field


class MailgunMailer(HttpProviderMailer):
    name: ClassVar[str] = "mailgun"

    def auth_headers(self) -> dict[str, str]:
        token = base64.b64encode(f"api:{self.target.api_key}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def fields(self, email: OutgoingEmail) -> list[tuple[str, str]]:
        """The form's fields, in order."""
        return [
            ("from", email.from_header or email.sender),
            ("to", email.recipient),
            ("subject", email.subject),
            ("text", email.text),
            ("html", email.html),
            *((f"h:{name}", value) for name, value in email.headers),
            ("v:authsvc_job", str(email.public_job_id)),
            # Tracking would rewrite the link we mint: keep it as sent.
            ("o:tracking", "no"),
        ]

    def greeting_request(self, client: httpx.Client) -> httpx.Request:
        return client.build_request("GET", f"/v4/domains/{self.target.domain}",
                                    headers={"Accept": "application/json"})

    def greeting_answer(self, answer: Any) -> tuple[bool, str]:
        domain = answer.get("domain") if isinstance(answer, dict) else None
        state = json_field(domain, "state")
        return True, f"domain {self.target.domain} {state}" if state else ""

    def build_request(self, client: httpx.Client, email: OutgoingEmail) -> httpx.Request:
        # multipart/form-data, one part per field (a field may repeat).
        files = [(name, (None, value.encode("utf-8"))) for name, value in self.fields(email)]
        return client.build_request("POST", f"/v3/{self.target.domain}/messages",
                                    files=files, headers={"Accept": "application/json"})

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        return json_field(answer, "id")

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        return json_field(answer, "message") or text
