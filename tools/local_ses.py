"""A local Amazon SES v2 (SendEmail) and its SNS notifications, for tests and chaos.

`POST /v2/email/outbound-emails` as AWS documents it: a Signature Version 4
`Authorization` header for service `ses` in the fake's region, checked here
by recomputing it from the documented algorithm (written separately from
botocore, which signs authsvc's requests); an unknown access key is 403
`UnrecognizedClientException`, a wrong signature 403
`InvalidSignatureException`, a request timed more than 5 minutes off 403
"Signature expired". The body needs `FromEmailAddress`, `Destination`
and `Content.Simple` (else 400 `BadRequestException`); success is
`{"MessageId": …}`. Errors carry their type in `x-amzn-ErrorType` and the
text in `{"message": …}`; a 429 is `TooManyRequestsException`. No
idempotency key.

Bounce and complaint notifications come as Amazon SNS HTTP(S) messages,
signed with this fake's own RSA key (SignatureVersion 1, SHA1withRSA, or 2,
SHA256withRSA); the certificate URL names Amazon's host
(`https://sns.REGION.amazonaws.com/SimpleNotificationService-….pem`) and
this server answers for it, so a test routes that host here. It also
answers the subscription's `SubscribeURL` (`Action=ConfirmSubscription`)
and counts each confirmation.

`GetAccount` (`GET /v2/email/account`, what `authsvc check` reads) is signed
and checked like the send, and answers the account as the SES v2 reference
documents it (SendingEnabled, ProductionAccessEnabled, SendQuota, ...);
credentials whose policy lacks `ses:GetAccount` (`get_account_allowed=False`)
get 403 `AccessDeniedException` after their signature checks out.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import uuid
from typing import Any, ClassVar
from urllib.parse import parse_qs, quote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from tools.local_provider import (
    Answer,
    LocalProvider,
    Message,
    Notification,
    Request,
)

MAX_SKEW_SECONDS = 5 * 60
_CREDENTIAL = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?"
    r"Signature=(?P<signature>[0-9a-f]{64})$")
# The fields SNS signs, in order, by message type (the Amazon SNS developer guide).
# Restated from the guide rather than imported from authsvc.bounces.sns, as the
# SigV4 check is written apart from botocore: a mistake in authsvc's list then
# fails the webhook tests instead of being signed the same way here.
SIGNED_FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token",
                                 "TopicArn", "Type"),
    "UnsubscribeConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token",
                                "TopicArn", "Type"),
}


def sns_bytes_to_sign(message: dict[str, Any]) -> bytes:
    fields = SIGNED_FIELDS[message["Type"]]
    return "".join(f"{name}\n{message[name]}\n" for name in fields if name in message).encode()


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


class LocalSes(LocalProvider):
    name: ClassVar[str] = "ses"

    def __init__(self, api_key: str = "AKIALOCALTEST0000001", *,
                 secret_key: str = "local/test/secret/access/key/0000000000",  # noqa: S107  (a fake's)
                 region: str = "us-east-1",
                 topic_arn: str = "arn:aws:sns:us-east-1:123456789012:authsvc-ses-events",
                 signature_version: str = "1", get_account_allowed: bool = True,
                 sending_enabled: bool = True, **options: Any) -> None:
        super().__init__(api_key, **options)
        self.secret_key = secret_key
        self.get_account_allowed = get_account_allowed  # the IAM policy allows ses:GetAccount
        self.sending_enabled = sending_enabled  # False: the account's sending is paused
        self.region = region
        self.topic_arn = topic_arn
        self.signature_version = signature_version
        self.confirmations: list[dict[str, list[str]]] = []
        self.confirm_status = 200  # what SNS answers a SubscribeURL (a test may break it)
        self._rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
        now = dt.datetime.now(dt.UTC)
        self.certificate = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(self._rsa.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .sign(self._rsa, hashes.SHA256()))
        pem = self.certificate.public_bytes(serialization.Encoding.PEM)
        self.certificate_pem = pem
        self.certificate_path = (
            f"/SimpleNotificationService-{hashlib.sha256(pem).hexdigest()[:32]}.pem")

    @property
    def mail_url(self) -> str:
        return (f"ses+http://{self.api_key}:{quote(self.secret_key, safe='')}@127.0.0.1:"
                f"{self.port}?region={self.region}")

    @property
    def sns_host(self) -> str:
        return f"sns.{self.region}.amazonaws.com"

    def is_send(self, method: str, path: str) -> bool:
        return method == "POST" and path == "/v2/email/outbound-emails"

    def authenticate(self, request: Request) -> Answer | None:
        found = _CREDENTIAL.match(request.headers.get("authorization", ""))
        if found is None:
            return _error(403, "MissingAuthenticationTokenException",
                          "Missing Authentication Token")
        if found["key"] != self.api_key:
            return _error(403, "UnrecognizedClientException",
                          "The security token included in the request is invalid.")
        amz_date = request.headers.get("x-amz-date", "")
        try:
            when = dt.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
        except ValueError:
            return _error(403, "IncompleteSignatureException", "X-Amz-Date is missing or bad")
        skew = abs((dt.datetime.fromtimestamp(self.clock(), dt.UTC) - when).total_seconds())
        if skew > MAX_SKEW_SECONDS:
            return _error(403, "InvalidSignatureException", f"Signature expired: {amz_date}")
        signed = found["signed"].split(";")
        if (found["date"] != amz_date[:8] or found["region"] != self.region
                or found["service"] != "ses" or "host" not in signed):
            return _error(403, "InvalidSignatureException", "Credential should be scoped to"
                          f" a valid region and service ({self.region}/ses).")
        try:
            headers = "".join(f"{h}:{' '.join(request.headers[h].split())}\n" for h in signed)
        except KeyError:
            return _error(403, "InvalidSignatureException", "A signed header is missing")
        canonical = "\n".join([request.method, request.path, request.query, headers,
                               found["signed"], hashlib.sha256(request.raw).hexdigest()])
        scope = f"{found['date']}/{self.region}/ses/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        key = _hmac(("AWS4" + self.secret_key).encode(), found["date"])
        for part in (self.region, "ses", "aws4_request"):
            key = _hmac(key, part)
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, found["signature"]):
            return _error(403, "InvalidSignatureException",
                          "The request signature we calculated does not match the signature"
                          " you provided.")
        return None

    def read_message(self, request: Request) -> tuple[Any, Message] | Answer:
        try:
            body = json.loads(request.raw)
            simple = body["Content"]["Simple"]
            to = body["Destination"]["ToAddresses"]
            sender = body["FromEmailAddress"]
            subject = simple["Subject"]["Data"]
            parts = simple["Body"]
        except (ValueError, KeyError, TypeError):
            return _error(400, "BadRequestException", "The request body is not a valid"
                          " SendEmail request.")
        if not isinstance(to, list) or not to or not isinstance(sender, str) or not (
                isinstance(parts, dict) and (parts.get("Text") or parts.get("Html"))):
            return _error(400, "BadRequestException", "Destination, FromEmailAddress and a"
                          " Text or Html body are required.")
        if not sender.isascii():
            # SES takes a non-ASCII display name only as an RFC 2047 encoded word.
            return _error(400, "BadRequestException", "Illegal address: a non-ASCII display"
                          " name in FromEmailAddress must be RFC 2047 encoded.")
        headers = simple.get("Headers", [])
        job = next((h.get("Value") for h in headers
                    if isinstance(h, dict) and h.get("Name") == "X-Authsvc-Job"), None)
        return body, Message(to=tuple(to), subject=str(subject),
                             text=str((parts.get("Text") or {}).get("Data", "")),
                             html=str((parts.get("Html") or {}).get("Data", "")),
                             public_job_id=job)

    def new_message_id(self) -> str:
        return f"0100018c{secrets.token_hex(12)}-{uuid.uuid4()}-000000"

    def accepted(self, message_id: str) -> Answer:
        return Answer.json(200, {"MessageId": message_id})

    def error(self, status: int, message: str) -> Answer:
        kind = {400: "BadRequestException", 403: "AccessDeniedException",
                404: "NotFoundException", 429: "TooManyRequestsException"}.get(
                    status, "InternalServiceErrorException")
        return _error(status, kind, message)

    def coded_error(self, status: int, code: object, message: str) -> Answer:
        return _error(status, str(code), message)  # code: the x-amzn-ErrorType

    def other(self, request: Request) -> Answer:
        """GetAccount; the certificate, and SubscribeURL confirmations, as SNS's host would
        answer them."""
        if request.method == "GET" and request.path == "/v2/email/account":
            return self.get_account(request)
        if request.method == "GET" and request.path == self.certificate_path:
            return Answer(200, self.certificate_pem, content_type="application/x-pem-file")
        query = parse_qs(request.query)
        if request.method == "GET" and request.path == "/" and query.get("Action") == [
                "ConfirmSubscription"]:
            if self.confirm_status != 200:
                return _error(self.confirm_status, "InternalError", "try again")
            self.confirmations.append(query)
            arn = f"{self.topic_arn}:{uuid.uuid4()}"
            return Answer(200, ("<ConfirmSubscriptionResponse><ConfirmSubscriptionResult>"
                                f"<SubscriptionArn>{arn}</SubscriptionArn>"
                                "</ConfirmSubscriptionResult></ConfirmSubscriptionResponse>"
                                ).encode(), content_type="text/xml")
        return _error(404, "NotFoundException", "no such endpoint")

    def get_account(self, request: Request) -> Answer:
        refused = self.authenticate(request)
        if refused is not None:
            return refused
        if not self.get_account_allowed:
            return _error(403, "AccessDeniedException",
                          "User: arn:aws:iam::123456789012:user/authsvc is not authorized to"
                          " perform: ses:GetAccount")
        return Answer.json(200, {
            "DedicatedIpAutoWarmupEnabled": False, "EnforcementStatus": "HEALTHY",
            "ProductionAccessEnabled": True, "SendingEnabled": self.sending_enabled,
            "SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": 14.0,
                          "SentLast24Hours": float(len(self.delivered))},
            "SuppressionAttributes": {"SuppressedReasons": ["BOUNCE", "COMPLAINT"]}})

    # SNS messages, signed.
    def webhook_settings(self) -> dict[str, str]:
        return {"AUTHSVC_SES_WEBHOOK_TOPIC_ARNS": self.topic_arn}

    def sns_message(self, kind: str, fields: dict[str, str], *, topic_arn: str | None = None,
                    timestamp: dt.datetime | None = None, certificate_url: str | None = None,
                    version: str | None = None) -> Notification:
        when = timestamp or dt.datetime.now(dt.UTC)
        message: dict[str, Any] = {
            "Type": kind, "MessageId": str(uuid.uuid4()),
            "TopicArn": topic_arn or self.topic_arn,
            **fields,
            "Timestamp": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "SignatureVersion": version or self.signature_version,
            "SigningCertURL": certificate_url or f"https://{self.sns_host}{self.certificate_path}",
        }
        digest = hashes.SHA1() if message["SignatureVersion"] == "1" else hashes.SHA256()  # noqa: S303
        signature = self._rsa.sign(sns_bytes_to_sign(message), padding.PKCS1v15(), digest)
        message["Signature"] = base64.b64encode(signature).decode()
        if kind == "Notification":
            message["UnsubscribeURL"] = (
                f"https://{self.sns_host}/?Action=Unsubscribe&SubscriptionArn="
                f"{quote(message['TopicArn'])}:{uuid.uuid4()}")
        return Notification(json.dumps(message).encode(), {
            "Content-Type": "text/plain; charset=UTF-8", "x-amz-sns-message-type": kind,
            "x-amz-sns-message-id": message["MessageId"],
            "x-amz-sns-topic-arn": message["TopicArn"]})

    def subscription_confirmation(self, *, subscribe_url: str | None = None,
                                  topic_arn: str | None = None) -> Notification:
        token = secrets.token_hex(64)
        arn = topic_arn or self.topic_arn
        url = subscribe_url or (f"https://{self.sns_host}/?Action=ConfirmSubscription"
                                f"&TopicArn={quote(arn)}&Token={token}")
        return self.sns_message("SubscriptionConfirmation", {
            "Token": token, "SubscribeURL": url,
            "Message": f"You have chosen to subscribe to the topic {arn}.\nTo confirm the"
                       " subscription, visit the SubscribeURL included in this message."},
            topic_arn=arn)

    def ses_event(self, event: dict[str, Any], **options: Any) -> Notification:
        return self.sns_message("Notification", {"Message": json.dumps(event)}, **options)

    def _mail(self, address: str, message_id: str) -> dict[str, Any]:
        return {"timestamp": _iso(), "source": "no-reply@example.com",
                "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/example.com",
                "messageId": message_id, "destination": [address],
                "tags": {"authsvc_job": ["00000000-0000-0000-0000-000000000000"]}}

    def bounce(self, address: str, *, hard: bool = True,
               message_id: str = "0100018c-ses-message-id", **options: Any) -> Notification:
        return self.ses_event({
            "notificationType": "Bounce",
            "bounce": {"bounceType": "Permanent" if hard else "Transient",
                       "bounceSubType": "General" if hard else "MailboxFull",
                       "bouncedRecipients": [{"emailAddress": address, "action": "failed",
                                              "status": "5.1.1",
                                              "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
                       "timestamp": _iso(), "feedbackId": f"0100018c-{uuid.uuid4()}-000000"},
            "mail": self._mail(address, message_id)}, **options)

    def complaint(self, address: str, *, message_id: str = "0100018c-ses-message-id",
                  **options: Any) -> Notification:
        return self.ses_event({
            "notificationType": "Complaint",
            "complaint": {"complainedRecipients": [{"emailAddress": address}],
                          "timestamp": _iso(), "feedbackId": f"0100018c-{uuid.uuid4()}-000000",
                          "complaintFeedbackType": "abuse"},
            "mail": self._mail(address, message_id)}, **options)

    def delivery(self, address: str, *, message_id: str = "0100018c-ses-message-id",
                 **options: Any) -> Notification:
        return self.ses_event({
            "notificationType": "Delivery",
            "delivery": {"timestamp": _iso(), "recipients": [address],
                         "processingTimeMillis": 546, "smtpResponse": "250 ok"},
            "mail": self._mail(address, message_id)}, **options)


def _iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _error(status: int, kind: str, message: str) -> Answer:
    return Answer(status, json.dumps({"message": message}).encode(),
                  {"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/"
                                       "com.amazonaws.sesv2/"})
