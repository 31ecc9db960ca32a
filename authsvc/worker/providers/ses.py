"""Amazon SES v2 `SendEmail`: `POST /v2/email/outbound-emails`, signed with SigV4.

The request is signed by botocore's SigV4 signer (service `ses`, the URL's
region) rather than by hand: canonicalisation is easy to get subtly wrong
and botocore is AWS's own. The body is the documented `Simple` content
(subject, text and HTML parts, and headers: the X-Authsvc-* ones; a
non-ASCII sender name RFC 2047 encoded, as SES requires), with the
job's public id as an email tag and the optional configuration set (where
the bounce and complaint events are published). The answer's `MessageId`
becomes the job's provider_message_id.

Errors carry their type in the `x-amzn-ErrorType` header (or `__type` in the
body) and the text in `message`: `TooManyRequestsException` (429) and the
account's sending limits or pause (`LimitExceededException`,
`SendingPausedException`, throttling) are retried — the message is fine, the
account is not, yet; every other 4xx (`MessageRejected`, an unverified
address, a bad signature) fails the job. SES takes no idempotency key: a lost
answer is ambiguous (docs/providers.md).

`authsvc check` reads the account (`GetAccount`, `GET /v2/email/account`,
signed the same way, read-only). Credentials whose policy allows sending
but not `ses:GetAccount` are refused there with `AccessDeniedException`,
which AWS answers only once it has verified the signature: the check says
so instead of failing them. An account whose sending is paused fails it.
"""

from __future__ import annotations

import json
from email.utils import formataddr, parseaddr
from typing import Any, ClassVar

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from authsvc.worker.mailers import OutgoingEmail
from authsvc.worker.providers.http import HttpProviderMailer, json_field

SIGNING_NAME = "ses"  # SES v2's endpoint prefix is `email`; it signs as `ses`
NOT_ALLOWED = "AccessDeniedException"  # authenticated, not authorized for this action
RETRYABLE_ERRORS = frozenset({
    "TooManyRequestsException", "LimitExceededException", "SendingPausedException",
    "Throttling", "ThrottlingException",
})


def error_type(response: httpx.Response, answer: Any) -> str | None:
    """The AWS error type, from the header (`Name:namespace`) or the body."""
    value = response.headers.get("x-amzn-ErrorType")
    if not value and isinstance(answer, dict):
        value = json_field(answer, "__type") or json_field(answer, "code")
    if not value:
        return None
    return value.split(":", 1)[0].rsplit("#", 1)[-1]


def from_email_address(value: str) -> str:
    """The From for SES: a non-ASCII display name as an RFC 2047 encoded word, which is
    the only form SES takes it in (an ASCII one, and the address, go as they are;
    a non-ASCII address has no encoded form here, so SES judges it as written)."""
    display, address = parseaddr(value)
    if value.isascii() or not display or not address or not address.isascii():
        return value
    return formataddr((display, address), charset="utf-8")


class SesMailer(HttpProviderMailer):
    name: ClassVar[str] = "ses"
    path: ClassVar[str] = "/v2/email/outbound-emails"

    def auth_headers(self) -> dict[str, str]:
        return {}  # every request is signed on its own (build_request)

    def body(self, email: OutgoingEmail) -> dict[str, Any]:
        body: dict[str, Any] = {
            "FromEmailAddress": from_email_address(email.from_header or email.sender),
            "Destination": {"ToAddresses": [email.recipient]},
            "Content": {"Simple": {
                "Subject": {"Data": email.subject, "Charset": "UTF-8"},
                "Body": {"Text": {"Data": email.text, "Charset": "UTF-8"},
                         "Html": {"Data": email.html, "Charset": "UTF-8"}},
                "Headers": [{"Name": name, "Value": value} for name, value in email.headers],
            }},
            "EmailTags": [{"Name": "authsvc_job", "Value": str(email.public_job_id)}],
        }
        configuration_set = self.target.option("configuration_set")
        if configuration_set:
            body["ConfigurationSetName"] = configuration_set
        return body

    def build_request(self, client: httpx.Client, email: OutgoingEmail) -> httpx.Request:
        data = json.dumps(self.body(email), separators=(",", ":")).encode()
        return self._signed(client, "POST", self.path, data)

    def greeting_request(self, client: httpx.Client) -> httpx.Request:
        return self._signed(client, "GET", "/v2/email/account", b"")

    def _signed(self, client: httpx.Client, method: str, path: str,
                data: bytes) -> httpx.Request:
        headers = {"Content-Type": "application/json"} if data else {}
        signed = AWSRequest(method=method, url=f"{self.target.base_url}{path}", data=data,
                            headers=headers)
        assert self.target.region is not None and self.target.secret is not None
        credentials = Credentials(self.target.api_key, self.target.secret)
        SigV4Auth(credentials, SIGNING_NAME, self.target.region).add_auth(signed)
        headers = {name: str(value) for name, value in signed.headers.items()}
        return client.build_request(method, path, content=data or None,
                                    headers={"Accept": "application/json", **headers})

    def greeting_answer(self, answer: Any) -> tuple[bool, str]:
        if not isinstance(answer, dict):
            return True, ""
        if answer.get("SendingEnabled") is False:
            return False, f"sending is paused for this account in {self.target.region}"
        sandbox = ("; in the sandbox: only verified addresses receive"
                   if answer.get("ProductionAccessEnabled") is False else "")
        quota = answer.get("SendQuota")
        if isinstance(quota, dict) and isinstance(quota.get("Max24HourSend"), (int, float)):
            sent = quota.get("SentLast24Hours")
            sent = sent if isinstance(sent, (int, float)) else 0
            return True, (f"sending enabled in {self.target.region}, {sent:g} of"
                          f" {quota['Max24HourSend']:g} sent in 24 h{sandbox}")
        return True, f"sending enabled in {self.target.region}{sandbox}"

    def key_only_restricted(self, response: httpx.Response, answer: Any) -> str | None:
        if error_type(response, answer) == NOT_ALLOWED:
            return "signature verified; the credentials' policy does not allow ses:GetAccount"
        return None

    def message_id(self, answer: Any, response: httpx.Response) -> str | None:
        return json_field(answer, "MessageId")

    def error_message(self, response: httpx.Response, answer: Any, text: str) -> str:
        message = json_field(answer, "message") or json_field(answer, "Message") or text
        kind = error_type(response, answer)
        return f"{kind}: {message}" if kind else message

    def retryable_refusal(self, response: httpx.Response, answer: Any) -> bool:
        return error_type(response, answer) in RETRYABLE_ERRORS
