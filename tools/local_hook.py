"""A local app that delivers its own mail: the receiving end of SPEC §10's `hook://`.

It verifies each POST as a Standard Webhook under the app's `whsec_` secret
(401 otherwise, as an app should), keeps every request it got (`requests`)
and deduplicates them on `webhook-id` the way the docs tell apps to: a
repeated id is answered 200 again and delivered once (`delivered`). It can
misbehave like the provider fakes (tools/local_provider.py): fail with a
status, stall or drop after accepting, and call `on_accept` between
accepting and answering, where the chaos harness kills the sending worker.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tools.local_provider import Answer, LocalProvider, Message, Remembered, Request

DEDUP_SECONDS = 7 * 86400.0  # what an app keeps ids for: longer than any retry


class LocalHook(LocalProvider):
    name: ClassVar[str] = "hook"
    key_seconds: ClassVar[float | None] = DEDUP_SECONDS

    def __init__(self, secret: str | None = None, **options: Any) -> None:
        super().__init__("unused", **options)
        self.secret = secret  # set it once `apps update --delivery-url` has printed it
        self.path = "/authsvc/mail"

    @property
    def url(self) -> str:
        return f"{self.origin}{self.path}"

    @property
    def mail_url(self) -> str:
        raise NotImplementedError("an app's hook is set per app: apps update --delivery-url")

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path == self.path

    def authenticate(self, request: Request) -> Answer | None:
        if self.secret is None:
            return Answer.json(401, {"error": "no secret configured yet"})
        try:
            Webhook(self.secret).verify(request.raw, {
                k: v for k, v in request.headers.items() if k.startswith("webhook-")})
        except WebhookVerificationError as exc:
            return Answer.json(401, {"error": str(exc)})
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        try:
            event = json.loads(request.raw)
            data = event["data"]
        except (ValueError, KeyError, TypeError):
            return Answer.json(400, {"error": "not an email.send event"})
        webhook_id = request.headers.get("webhook-id", "")
        return event, Message(to=(str(data.get("to")),), subject=str(data.get("subject")),
                              text=str(data.get("text")), html=str(data.get("html")),
                              public_job_id=webhook_id.removeprefix("authsvc-job-") or None,
                              idempotency_key=webhook_id or None)

    def accepted(self, message_id: str) -> Answer:
        return Answer(204)

    def error(self, status: int, message: str) -> Answer:
        return Answer.json(status, {"error": message})

    def repeated(self, remembered: Remembered, body_hash: str) -> Answer:
        # Seen this id: acknowledge, deliver nothing (while the first is still
        # being answered too: the app has the email either way).
        return Answer(204)
