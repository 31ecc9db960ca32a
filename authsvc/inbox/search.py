"""Search across every scope: a small query language, read into one parameterised statement.

    to:alice subject:"reset your" after:2026-12-01 before:2026-12-02T12:00Z welcome

`to:`, `from:` and `subject:` are case-insensitive substrings of an envelope
recipient, the From header and the subject; `after:` and `before:` bound the
time received (a date means its midnight UTC; a time without a zone is UTC);
any other word is a substring of the subject, sender, recipients, scope or
text part. Every term must match. A value with spaces goes in double quotes.
`%` and `_` match themselves. Newest first, paged by `older_than`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from psycopg import Connection

from authsvc.db.queries import load_queries
from authsvc.inbox import params
from authsvc.inbox.messages import RETENTION_SECONDS, InboxMessage, describe_messages, like_pattern
from authsvc.inbox.params import MAX_FILTER_LENGTH, MAX_ID, BadRequest

Q = load_queries(Path(__file__).with_suffix(".sql"))
MAX_QUERY_LENGTH = 500
MAX_TERMS = 20
MAX_PAGE = 100
DEFAULT_PAGE = 20
# A search reads every scope's messages; a broad one over a full inbox may not
# finish in this long, and then answers 503 search_timeout rather than
# holding a connection of the short-query pool.
TIMEOUT_MS = 5000
TIMEOUT_ADVICE = (
    f"The search took longer than {TIMEOUT_MS // 1000} s: narrow it with to:, subject: or after:."
)
# Searches running at once, per inbox server. A broad search may hold a pooled
# connection (and its thread) for up to TIMEOUT_MS; unbounded, a few of them
# would leave listings, expect-one and the long polls' checks waiting for a
# thread. Beyond these a search waits briefly for a slot (a quick one takes
# milliseconds), then answers 503 search_busy with Retry-After.
SLOTS = 2
QUEUE_SECONDS = 1.0
BUSY_RETRY_AFTER = "1"
BUSY_ADVICE = f"{SLOTS} other searches are running: retry in a moment."
FIELDS = ("to", "from", "subject", "after", "before")
# A term: field:"quoted value", field:value, "quoted words" or a bare word.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SPACE = re.compile(r"\s*")
_TERM = re.compile(r'(?:(?P<field>[A-Za-z]+):)?(?:"(?P<quoted>[^"]*)"|(?P<bare>[^\s"]+))')


class SearchBusy(Exception):
    """Every search slot stayed taken for QUEUE_SECONDS."""


@dataclass
class SearchQuery:
    to: list[str] = field(default_factory=list)
    sender: list[str] = field(default_factory=list)
    subject: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    after: datetime | None = None
    before: datetime | None = None


@dataclass(frozen=True)
class SearchPage:
    messages: list[InboxMessage]
    more: bool

    def as_json(self, query: str) -> dict[str, Any]:
        return {
            "query": query,
            "messages": [m.as_json() for m in self.messages],
            "more": self.more,
            "next_older_than": self.messages[-1].id if self.more else None,
        }


def _moment(term: str, value: str) -> datetime:
    try:
        if not _DATE.match(value):
            raise ValueError(value)
        if _DATE.fullmatch(value):
            return datetime.combine(date.fromisoformat(value), time(), UTC)
        moment = datetime.fromisoformat(value.upper())
    except ValueError:
        raise BadRequest(
            f"{term} is not a date: use YYYY-MM-DD or an ISO 8601 time such as "
            "2026-12-01T09:30:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_query(raw: str) -> SearchQuery:
    """The query's terms, or BadRequest naming the first one that is malformed."""
    if len(raw) > MAX_QUERY_LENGTH:
        raise BadRequest(f"q is at most {MAX_QUERY_LENGTH} characters")
    if any(c in raw for c in "\r\n\x00") or not params.storable(raw):
        raise BadRequest("q must be one line of UTF-8 text without NUL characters")
    if raw.count('"') % 2:
        raise BadRequest('q has an unclosed double quote: close it, as in subject:"reset your"')
    found = SearchQuery()
    position, terms = 0, 0
    while True:
        position = _SPACE.match(raw, position).end()  # type: ignore[union-attr]
        if position >= len(raw):
            break
        match = _TERM.match(raw, position)
        if match is None:  # a quote right after a bare word: name:"x"y or abc"d"
            raise BadRequest(f"q cannot be read from {raw[position:position + 30]!r}")
        position = match.end()
        terms += 1
        if terms > MAX_TERMS:
            raise BadRequest(f"q has more than {MAX_TERMS} terms")
        _add(found, match.group(0), match.group("field"), match["quoted"] or match["bare"] or "")
    return found


def _add(found: SearchQuery, term: str, name: str | None, value: str) -> None:
    known = name.lower() if name and name.lower() in FIELDS else None
    if name is None and term.endswith(":") and term[:-1].lower() in FIELDS:
        known, value = term[:-1].lower(), ""  # "to:" alone
    if known is None:
        # An unknown prefix is text ("https://…", "re:"): the whole term is a word.
        value = term.strip('"') if name is None else term
    if not value:
        raise BadRequest(f"{term} needs a value, as in {known or 'subject'}:reset")
    if len(value) > MAX_FILTER_LENGTH:
        raise BadRequest(f"{term[:40]}… is longer than {MAX_FILTER_LENGTH} characters")
    if known == "after":
        found.after = _moment(term, value)
    elif known == "before":
        found.before = _moment(term, value)
    elif known == "from":
        found.sender.append(value)
    elif known in ("to", "subject"):
        getattr(found, known).append(value)
    else:
        found.words.append(value)


def search(
    conn: Connection, query: SearchQuery, *, limit: int = DEFAULT_PAGE, older_than: int = MAX_ID,
) -> SearchPage:
    """One page of matching messages, newest first, without bodies; QueryCanceled past the
    time bound."""
    values = {
        "retention_seconds": RETENTION_SECONDS,
        "to": [like_pattern(v) for v in query.to],
        "sender": [like_pattern(v) for v in query.sender],
        "subject": [like_pattern(v) for v in query.subject],
        "words": [like_pattern(v) for v in query.words],
        "after": query.after,
        "before": query.before,
        "older_than": older_than,
        "limit": limit + 1,
    }
    with conn.transaction():
        conn.execute(Q["bound_search_time"], {"ms": str(TIMEOUT_MS)})
        ids = [row[0] for row in conn.execute(Q["search_messages"], values)]
        found = describe_messages(conn, ids[:limit])
    return SearchPage(found[::-1], len(ids) > limit)
