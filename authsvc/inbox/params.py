"""Query parameters of the /_inbox API: what each one may be, and the 400 when it is not."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from authsvc.inbox.scopes import BadScope, normalise_scope

MAX_WAIT_SECONDS = 30.0
MAX_SETTLE_SECONDS = 10.0
DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_SETTLE_SECONDS = 1.0
MAX_ID = 2**63 - 1
MAX_LISTED = 500
MAX_FILTER_LENGTH = 200
_DECIMAL = re.compile(r"\d{1,6}(\.\d{1,6})?")
_INTEGER = re.compile(r"\d{1,19}")
_BOOLEAN = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


class BadRequest(Exception):
    """A malformed parameter; `detail` says which and why."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class Filters:
    """Case-insensitive substring filters: envelope recipient, subject, anywhere."""

    to: str | None = None
    subject: str | None = None
    q: str | None = None


@dataclass(frozen=True)
class ListQuery:
    scope: str
    wait: float
    minimum: int
    since: int
    limit: int
    bodies: bool
    filters: Filters


@dataclass(frozen=True)
class ExpectQuery:
    scope: str
    timeout: float
    settle: float
    since: int
    filters: Filters


def seconds(args: Mapping[str, str], name: str, default: float, maximum: float) -> float:
    raw = args.get(name)
    if raw is None:
        return default
    if not _DECIMAL.fullmatch(raw) or float(raw) > maximum:
        raise BadRequest(f"{name} must be a number of seconds from 0 to {maximum:g}, got {raw!r}")
    return float(raw)


def integer(
    args: Mapping[str, str], name: str, default: int, maximum: int, minimum: int = 0
) -> int:
    raw = args.get(name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw) or not minimum <= int(raw) <= maximum:
        raise BadRequest(f"{name} must be a whole number from {minimum} to {maximum}, got {raw!r}")
    return int(raw)


def boolean(args: Mapping[str, str], name: str, default: bool) -> bool:
    raw = args.get(name)
    if raw is None:
        return default
    if raw.lower() not in _BOOLEAN:
        raise BadRequest(f"{name} must be 1 or 0, got {raw!r}")
    return _BOOLEAN[raw.lower()]


def scope(raw: str) -> str:
    try:
        return normalise_scope(raw)
    except BadScope as exc:
        raise BadRequest(str(exc)) from None


def storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def filters(args: Mapping[str, str]) -> Filters:
    found: dict[str, str | None] = {}
    for name in ("to", "subject", "q"):
        raw = args.get(name)
        if raw is not None and len(raw) > MAX_FILTER_LENGTH:
            raise BadRequest(f"{name} is at most {MAX_FILTER_LENGTH} characters")
        if raw is not None and not storable(raw):
            # PostgreSQL text holds neither NUL nor lone surrogates (bytes that
            # were not UTF-8): such a filter could never match, and would fail.
            raise BadRequest(f"{name} must be UTF-8 text without NUL characters")
        found[name] = raw or None
    return Filters(**found)


def list_query(raw_scope: str, args: Mapping[str, str]) -> ListQuery:
    """GET /scopes/{scope}/messages?wait=&min=&since=&limit=&bodies=&to=&subject=&q="""
    return ListQuery(
        scope=scope(raw_scope),
        wait=seconds(args, "wait", 0.0, MAX_WAIT_SECONDS),
        minimum=integer(args, "min", 1, MAX_LISTED),
        since=integer(args, "since", 0, MAX_ID),
        limit=integer(args, "limit", MAX_LISTED, MAX_LISTED, minimum=1),
        bodies=boolean(args, "bodies", True),
        filters=filters(args),
    )


def expect_query(raw_scope: str, args: Mapping[str, str]) -> ExpectQuery:
    """GET /scopes/{scope}/expect-one?timeout=&settle=&since=&to=&subject=&q="""
    return ExpectQuery(
        scope=scope(raw_scope),
        timeout=seconds(args, "timeout", DEFAULT_TIMEOUT_SECONDS, MAX_WAIT_SECONDS),
        settle=seconds(args, "settle", DEFAULT_SETTLE_SECONDS, MAX_SETTLE_SECONDS),
        since=integer(args, "since", 0, MAX_ID),
        filters=filters(args),
    )
