"""What the providers' schemes share: the reader's outline and the checks every one makes.

A provider module (authsvc/bounces/providers/) is a `ProviderReader` (or a
`CredentialsReader`, for a provider that signs nothing) whose `read` turns
one POST into a Reading (authsvc/bounces/notices.py) with the helpers here:
a timestamp within its window, credentials compared in constant time, the
JSON body, and a notice's fields in the form authsvc stores them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from authsvc.accounts.addresses import InvalidAddress, parse_address
from authsvc.bounces.notices import Incoming, Malformed, Notice, Reading, Refused, SentMessage

MAX_DETAIL_CHARS = 500
ONE_EVENT_BYTES = 64 * 1024  # the app's own limit (authsvc/web/app.py): one event fits
BATCH_BYTES = 1024 * 1024  # SendGrid posts batches of up to 768 KB
# How far ahead of our clock a provider's timestamp may be (its clock, not an attack).
FUTURE_SKEW_SECONDS = 5 * 60


class ProviderReader:
    """The outline every provider's reader shares: its name (the URL's last part) and body limit."""

    name: str
    max_body_bytes: int = ONE_EVENT_BYTES


class CredentialsReader(ProviderReader):
    """A provider that signs nothing: its credentials (check_credentials), then its JSON body."""

    def __init__(self, auth: str) -> None:
        self.auth = auth

    def read(self, incoming: Incoming, now: float) -> Reading:
        check_credentials(incoming, self.auth)
        return self.read_body(json_body(incoming), now)

    def read_body(self, body: Any, now: float) -> Reading:
        """The notices of a body whose credentials were right; Malformed otherwise."""
        raise NotImplementedError


def notice(id: str, event: str, *, suppresses: Iterable[object] = (),
           message_id: object = None, about: object = None,
           sent: SentMessage | None = None) -> Notice:
    """A Notice from a provider's own fields, each kept only in the form authsvc stores.

    `suppresses`: the addresses the event suppresses (canonical_addresses);
    `message_id`: the provider's id of the message, when it is a string;
    `about`: the provider's description of the event (detail);
    `sent`: what must match the job authsvc sent (by default, the message id).
    """
    text_id = message_id if isinstance(message_id, str) and message_id else None
    return Notice(id=id, event=event, addresses=canonical_addresses(suppresses),
                  provider_message_id=text_id, detail=detail(about),
                  sent=sent if sent is not None else SentMessage(message_id=text_id))


def text_field(part: object, key: str) -> str | None:
    """A non-empty string field of a JSON object, or None."""
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, str) and value else None


def event_name(kind: str, subtype: object) -> str:
    """The provider's event name, with its subtype (`bounce/blocked`) when it gives one."""
    return f"{kind}/{subtype}" if isinstance(subtype, str) and subtype else kind


def check_fresh(when: float, now: float, *, window_seconds: float, what: str) -> None:
    """Refused when `when` lies outside [now - window, now + a little clock skew]."""
    if not math.isfinite(when):  # NaN would pass both comparisons below
        raise Refused(f"{what} is not a time: {when!r}")
    if when < now - window_seconds:
        raise Refused(f"{what} is {int(now - when)} s old, older than its {int(window_seconds)} s"
                      " window (a replay?)")
    if when > now + FUTURE_SKEW_SECONDS:
        raise Refused(f"{what} is {int(when - now)} s in the future")


def check_unix_time(timestamp: str, now: float, *, window_seconds: float) -> None:
    """A signed Unix time in whole seconds, within its window (check_fresh); Refused otherwise."""
    if not (timestamp.isascii() and timestamp.isdigit()):  # not "²", which float() refuses
        raise Refused(f"timestamp {timestamp!r} is not a Unix time")
    check_fresh(float(timestamp), now, window_seconds=window_seconds, what="the timestamp")


def check_credentials(incoming: Incoming, expected: str) -> None:
    """HTTP basic `user:password` (from the webhook URL) or `Authorization: Bearer TOKEN`.

    `expected` is the setting: with a colon it is basic credentials, else a
    token. Compared in constant time.
    """
    scheme, _, presented = (incoming.header("authorization") or "").partition(" ")
    presented = presented.strip()
    if ":" in expected:
        if scheme.lower() != "basic":
            raise Refused("no basic credentials")
        try:
            decoded = base64.b64decode(presented, validate=True)
        except (binascii.Error, ValueError):
            raise Refused("basic credentials that are not base64") from None
        given = decoded
    else:
        if scheme.lower() != "bearer":
            raise Refused("no bearer token")
        given = presented.encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(given, expected.encode()):
        raise Refused("wrong credentials")


def json_body(incoming: Incoming) -> Any:
    try:
        return json.loads(incoming.body)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's limit
        raise Malformed("The body must be JSON.") from None


def canonical_addresses(values: Iterable[object]) -> tuple[str, ...]:
    """The canonical form of each plain address; anything else is not one of ours."""
    found = []
    for value in values:
        try:
            found.append(parse_address(value))
        except InvalidAddress:
            continue  # authsvc only ever sends to canonical addresses
    return tuple(dict.fromkeys(found))


def detail(part: object) -> str | None:
    """A provider's own description of the event, for `suppressions list`."""
    if part is None:
        return None
    text = part if isinstance(part, str) else json.dumps(part, sort_keys=True)
    return text[:MAX_DETAIL_CHARS]


def digest_id(*parts: object) -> str:
    """An id for an event its provider gives none: the hash of what identifies it."""
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


def iso_time(value: object) -> float | None:
    """Seconds since the epoch from an ISO 8601 time (Z or an offset), or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None
