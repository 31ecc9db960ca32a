"""What a provider's notification says once verified, and the checks the schemes share.

A provider module (authsvc/bounces/providers/) turns one POST into a
`Reading`: the notices it carries, each with an id that is unique at that
provider (so a replay is recognised) and the canonical addresses it
suppresses. It raises `Refused` for anything it cannot verify (signature,
credentials, a timestamp outside its window, a certificate off the
provider's hosts) and `Malformed` for a verified body it cannot read.
Nothing here touches Flask or the database.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from authsvc.accounts.addresses import InvalidAddress, parse_address

MAX_DETAIL_CHARS = 500
ONE_EVENT_BYTES = 64 * 1024  # the app's own limit (authsvc/web/app.py): one event fits
BATCH_BYTES = 1024 * 1024  # SendGrid posts batches of up to 768 KB
# How far ahead of our clock a provider's timestamp may be (its clock, not an attack).
FUTURE_SKEW_SECONDS = 5 * 60


class Refused(Exception):
    """Not verifiably from the provider (or stale): changes nothing; `str` says why, for the log."""


class Malformed(Exception):
    """Verified, but not a notification this endpoint can read."""


@dataclass(frozen=True)
class Incoming:
    """One POST as received: lower-case header names, the exact body bytes."""

    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        value = self.headers.get(name.lower())
        return value if value else None


@dataclass(frozen=True)
class Notice:
    """One event: its id at the provider, and what it does here."""

    id: str  # unique at this provider: a second sight is a replay
    event: str  # the provider's own name for it, kept on the suppression
    addresses: tuple[str, ...] = ()  # canonical addresses it suppresses (none: acknowledged only)
    provider_message_id: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class Reading:
    notices: list[Notice] = field(default_factory=list)
    # SNS asks to be confirmed: a URL already pinned to its hosts, fetched once.
    confirm_url: str | None = None


class NoticeReader(Protocol):
    name: str
    max_body_bytes: int  # one POST; batching providers send more than the app's 64 KiB

    def read(self, incoming: Incoming, now: float) -> Reading:
        """The verified notices of one POST; Refused or Malformed otherwise."""
        ...


def check_fresh(when: float, now: float, *, window_seconds: float, what: str) -> None:
    """Refused when `when` lies outside [now - window, now + a little clock skew]."""
    if when < now - window_seconds:
        raise Refused(f"{what} is {int(now - when)} s old, older than its {int(window_seconds)} s"
                      " window (a replay?)")
    if when > now + FUTURE_SKEW_SECONDS:
        raise Refused(f"{what} is {int(when - now)} s in the future")


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
    except ValueError:
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
