"""What a provider's notification says once verified: the notices of one POST.

A provider module (authsvc/bounces/providers/) turns one POST into a
`Reading`: the notices it carries, each with an id that is unique at that
provider (so a replay is recognised) and the canonical addresses it
suppresses. It raises `Refused` for anything it cannot verify (signature,
credentials, a timestamp outside its window, a certificate off the
provider's hosts) and `Malformed` for a verified body it cannot read.
What the schemes share in reading one (the reader's outline, time windows,
credentials, a notice's fields) is in authsvc/bounces/schemes.py. Nothing
here touches Flask or the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


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
class SentMessage:
    """What a notice names of the message it is about, in the form authsvc recorded when
    sending: the provider's message id, the job's public id (when the provider echoes
    the variable or tag authsvc sent it as). A notice suppresses an address only when an
    email authsvc sent to that address matches each one given; with neither, none does."""

    message_id: str | None = None
    public_job_id: str | None = None


@dataclass(frozen=True)
class Notice:
    """One event: its id at the provider, and what it does here."""

    id: str  # unique at this provider: a second sight is a replay
    event: str  # the provider's own name for it, kept on the suppression
    addresses: tuple[str, ...] = ()  # canonical addresses it suppresses (none: acknowledged only)
    provider_message_id: str | None = None
    detail: str | None = None
    sent: SentMessage = SentMessage()  # the message it is about (nothing given: none of ours)


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
