"""Amazon SNS message signatures, with every URL pinned to SNS's own hosts.

SES publishes bounces and complaints to an SNS topic, which POSTs them here.
A message is believed only when (in this order, so nothing is fetched for a
message that fails a cheaper check):

1. its `TopicArn` is one the operator configured — SNS signs every topic's
   messages alike, and anyone can create a topic and subscribe this URL;
2. its `SigningCertURL` is https on `sns.REGION.amazonaws.com` (or `.com.cn`),
   the topic's region, the default port, a `.pem` path and nothing else;
3. the certificate fetched from there (no redirects, size-bounded, cached)
   is in its validity period and its RSA key verifies `Signature` over the
   documented fields (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA);
4. its `Timestamp` is within the last hour (the longest delivery retry
   policy SNS allows), and its `MessageId` was not seen before (the caller).

A `SubscriptionConfirmation`'s `SubscribeURL` is fetched only when it is
https on the same pinned host, `Action=ConfirmSubscription` for the
message's own topic: no other URL is ever fetched.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any
from urllib.parse import SplitResult, parse_qs, urlsplit

import httpx
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from authsvc.bounces.notices import Refused
from authsvc.bounces.schemes import check_fresh, iso_time

_SNS_HOST = re.compile(r"^sns\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?$")
_TOPIC_ARN = re.compile(r"^arn:aws(?:-cn|-us-gov)?:sns:(?P<region>[^:]+):\d{12}:[A-Za-z0-9_-]+$")
# The fields SNS signs, in this order, by message type (Amazon SNS developer guide,
# "Verifying the signatures of Amazon SNS messages"); a missing optional field is skipped.
SIGNED_FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token",
                                 "TopicArn", "Type"),
    "UnsubscribeConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token",
                                "TopicArn", "Type"),
}
DIGESTS = {"1": hashes.SHA1, "2": hashes.SHA256}
MAX_CERTIFICATE_BYTES = 16 * 1024
CACHED_CERTIFICATES = 16
FETCH_TIMEOUT_SECONDS = 5.0
MESSAGE_WINDOW_SECONDS = 3600.0


def _region_of_topic(topic_arn: str) -> str:
    found = _TOPIC_ARN.match(topic_arn)
    if found is None:
        raise Refused(f"TopicArn {topic_arn!r} is not an SNS topic ARN")
    return found.group("region")


def _pinned(url: object, topic_arn: str, what: str) -> SplitResult:
    """The URL's parts when it is https on SNS's host for the topic's region; Refused otherwise."""
    if not isinstance(url, str):
        raise Refused(f"{what} is missing")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise Refused(f"{what} {url!r} is not a URL") from None
    host = _SNS_HOST.match(parts.hostname or "")
    if (parts.scheme != "https" or host is None or port not in (None, 443)
            or parts.username is not None or parts.password is not None or parts.fragment
            or "\\" in url):
        raise Refused(f"{what} {url!r} is not on Amazon SNS's hosts")
    if host.group("region") != _region_of_topic(topic_arn):
        raise Refused(f"{what} {url!r} is not in the topic's region")
    return parts


def pinned_certificate_url(url: object, topic_arn: str) -> str:
    parts = _pinned(url, topic_arn, "SigningCertURL")
    if parts.query or not parts.path.endswith(".pem") or "/." in parts.path:
        raise Refused(f"SigningCertURL {url!r} is not an SNS certificate")
    assert isinstance(url, str)
    return url


def pinned_subscribe_url(url: object, topic_arn: str) -> str:
    parts = _pinned(url, topic_arn, "SubscribeURL")
    query = parse_qs(parts.query, keep_blank_values=True)
    if (parts.path not in ("", "/") or query.get("Action") != ["ConfirmSubscription"]
            or query.get("TopicArn") != [topic_arn] or len(query.get("Token", [])) != 1):
        raise Refused(f"SubscribeURL {url!r} does not confirm this topic")
    assert isinstance(url, str)
    return url


def bytes_to_sign(message: dict[str, Any]) -> bytes:
    fields = SIGNED_FIELDS[message["Type"]]
    lines = []
    for name in fields:
        value = message.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise Refused(f"{name} is not a string")
        lines.append(f"{name}\n{value}\n")
    return "".join(lines).encode()


class SnsFetcher:
    """GETs pinned SNS URLs: certificates (cached) and subscription confirmations.

    `route_to` (tests only, never configuration): send every request to this
    origin instead, after the URL was pinned — as `curl --resolve` would.
    """

    def __init__(self, *, route_to: str | None = None,
                 timeout: float = FETCH_TIMEOUT_SECONDS) -> None:
        self.route_to = route_to
        self.timeout = timeout
        self._certificates: OrderedDict[str, x509.Certificate] = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, url: str) -> bytes:
        target = url
        headers = {}
        if self.route_to is not None:
            parts = urlsplit(url)
            target = self.route_to + parts.path + (f"?{parts.query}" if parts.query else "")
            headers["Host"] = parts.netloc
        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=False) as client, \
                    client.stream("GET", target, headers=headers) as response:
                if response.status_code != 200:
                    raise Refused(f"{url} answered HTTP {response.status_code}")
                body = b""
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_CERTIFICATE_BYTES:
                        raise Refused(f"{url} answered more than {MAX_CERTIFICATE_BYTES} bytes")
                return body
        except httpx.HTTPError as exc:
            raise Refused(f"cannot fetch {url}: {type(exc).__name__}: {exc}") from None

    def certificate(self, url: str) -> x509.Certificate:
        with self._lock:
            cached = self._certificates.get(url)
            if cached is not None:
                self._certificates.move_to_end(url)
                return cached
        try:
            certificate = x509.load_pem_x509_certificate(self._get(url))
        except ValueError:
            raise Refused(f"{url} is not a PEM certificate") from None
        with self._lock:
            self._certificates[url] = certificate
            while len(self._certificates) > CACHED_CERTIFICATES:
                self._certificates.popitem(last=False)
        return certificate

    def confirm(self, url: str) -> None:
        self._get(url)


def verify_message(message: dict[str, Any], topic_arns: tuple[str, ...], fetcher: SnsFetcher,
                   now: float) -> None:
    """Refused unless `message` is a current SNS message of a configured topic (see above)."""
    kind = message.get("Type")
    if kind not in SIGNED_FIELDS:
        raise Refused(f"not an SNS message type: {kind!r}")
    topic_arn = message.get("TopicArn")
    if not isinstance(topic_arn, str) or topic_arn not in topic_arns:
        raise Refused(f"TopicArn {topic_arn!r} is not one of AUTHSVC_SES_WEBHOOK_TOPIC_ARNS")
    digest = DIGESTS.get(str(message.get("SignatureVersion")))
    if digest is None:
        raise Refused(f"SignatureVersion {message.get('SignatureVersion')!r} is not 1 or 2")
    url = pinned_certificate_url(message.get("SigningCertURL"), topic_arn)
    if not isinstance(message.get("Signature"), str) or not message["Signature"]:
        raise Refused("Signature is missing")
    try:
        signature = base64.b64decode(message["Signature"], validate=True)
    except (binascii.Error, ValueError):
        raise Refused("Signature is not base64") from None
    signed = bytes_to_sign(message)
    certificate = fetcher.certificate(url)
    moment = datetime.fromtimestamp(now, UTC)
    if not certificate.not_valid_before_utc <= moment <= certificate.not_valid_after_utc:
        raise Refused(f"the certificate at {url} is not valid now")
    key = certificate.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise Refused(f"the certificate at {url} has no RSA key")
    try:
        key.verify(signature, signed, padding.PKCS1v15(), digest())
    except InvalidSignature:
        raise Refused("the SNS signature does not verify") from None
    when = iso_time(message.get("Timestamp"))
    if when is None:
        raise Refused(f"Timestamp {message.get('Timestamp')!r} is not a time")
    check_fresh(when, now, window_seconds=MESSAGE_WINDOW_SECONDS, what="the SNS message")
