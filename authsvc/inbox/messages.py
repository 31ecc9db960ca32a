"""The inbox tables: typed wrappers over inbox.sql, and the byte budget of an answer.

A message is stored once per SMTP transaction (inbox_contents: raw bytes and
what was parsed from them) and listed once per scope it went to
(inbox_messages: id, scope, recipients, time); migrations/0026_baseline.sql.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from authsvc.db.queries import load_queries
from authsvc.inbox.params import MAX_LISTED, Filters
from authsvc.inbox.parsing import ParsedMessage

Q = load_queries(Path(__file__).with_suffix(".sql"))
NOTIFY_CHANNEL = "authsvc_inbox"
RETENTION_SECONDS = 24 * 3600
DEFAULT_MAX_PER_SCOPE = 1000
NO_FILTERS = Filters()
# A listing inlines a message's text and HTML only below MAX_INLINE_BODY_BYTES,
# and only while the answer's inlined bodies stay under BODY_BUDGET_BYTES; the
# rest are listed with `body_omitted: true` (fetch them one by one). This is
# what bounds a request's memory whatever the scope holds.
MAX_INLINE_BODY_BYTES = 1024 * 1024
BODY_BUDGET_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class InboxMessage:
    id: int
    scope: str
    mail_from: str | None
    recipients: list[str]
    subject: str | None
    message_id: str | None
    headers: dict[str, list[str]]
    text_body: str | None
    html_body: str | None
    links: list[str]
    received_at: datetime
    age_seconds: float
    size: int
    body_bytes: int
    body_omitted: bool
    code: str | None = None
    # The state of each authsvc link, read when answering (link_states.with_states).
    link_states: tuple[dict[str, str | None], ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The message as the HTTP API shows it (SPEC §8)."""
        return {
            "id": self.id,
            "scope": self.scope,
            "to": self.recipients,
            "from": self.mail_from,
            "subject": self.subject,
            "received_at": self.received_at.isoformat(),
            "message_id": self.message_id,
            "text": self.text_body,
            "html": self.html_body,
            "links": self.links,
            "headers": self.headers,
            "size": self.size,
            "body_omitted": self.body_omitted,
            "code": self.code,
            "link_states": list(self.link_states),
        }


@dataclass(frozen=True)
class Page:
    """One listing answer: the messages and whether more follow (ask again with since=)."""

    messages: list[InboxMessage]
    more: bool

    def as_json(self, since: int) -> dict[str, Any]:
        last = self.messages[-1].id if self.messages else since
        return {
            "messages": [m.as_json() for m in self.messages],
            "more": self.more,
            "next_since": last,
        }


@dataclass(frozen=True)
class Seen:
    """What a waiting request re-checks: enough to count and to group re-sends."""

    id: int
    message_id: str | None
    age_seconds: float


@dataclass(frozen=True)
class ScopeSummary:
    scope: str
    messages: int
    last_id: int
    last_subject: str | None
    last_received_at: datetime

    def as_json(self) -> dict[str, Any]:
        """The summary as the HTTP API shows it: its fields as they are, the time in ISO 8601."""
        return dataclasses.asdict(self) | {"last_received_at": self.last_received_at.isoformat()}


def like_pattern(value: str) -> str:
    """A case-insensitive substring pattern for ILIKE, with %, _ and \\ matching themselves."""
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _like(value: str | None) -> str | None:
    return None if value is None else like_pattern(value)


def scan_params(scope: str, since: int, filters: Filters, limit: int) -> dict[str, Any]:
    """Parameters of scan_scope: which messages a poll checks and a listing shows."""
    return {
        "scope": scope,
        "since": since,
        "limit": limit,
        "retention_seconds": RETENTION_SECONDS,
        "to": _like(filters.to),
        "subject": _like(filters.subject),
        "q": _like(filters.q),
    }


def ids_to_inline(summaries: list[InboxMessage]) -> list[int]:
    """The messages whose bodies fit this answer's budget, oldest first."""
    chosen, spent = [], 0
    for message in summaries:
        if 0 < message.body_bytes <= MAX_INLINE_BODY_BYTES:
            if spent + message.body_bytes > BODY_BUDGET_BYTES:
                break
            spent += message.body_bytes
            chosen.append(message.id)
    return chosen


def with_bodies(
    summaries: list[InboxMessage], bodies: dict[int, tuple[str | None, str | None]]
) -> list[InboxMessage]:
    """The summaries with the fetched bodies filled in."""
    page = []
    for message in summaries:
        if message.id in bodies:
            text, html = bodies[message.id]
            message = dataclasses.replace(
                message, text_body=text, html_body=html, body_omitted=False
            )
        elif message.body_bytes == 0:
            message = dataclasses.replace(message, body_omitted=False)
        page.append(message)
    return page


def stored_bytes(parsed: ParsedMessage, raw: bytes) -> int:
    """What a message adds to the inbox's byte budget (inbox_contents.stored_bytes)."""
    return (
        len(raw)
        + len((parsed.text or "").encode("utf-8", "surrogatepass"))
        + len((parsed.html or "").encode("utf-8", "surrogatepass"))
    )


def insert_content(
    conn: Connection, parsed: ParsedMessage, raw: bytes, envelope_sender: str | None
) -> int:
    """Store a message's bytes and parsed parts once; its scopes point at the returned id."""
    row = conn.execute(
        Q["insert_content"],
        {
            "mail_from": parsed.sender or envelope_sender,
            "subject": parsed.subject,
            "message_id": parsed.message_id,
            "headers": Jsonb(parsed.headers),
            "text_body": parsed.text,
            "html_body": parsed.html,
            "links": parsed.links,
            "raw": raw,
            "code": parsed.code,
        },
    ).fetchone()
    assert row is not None
    return int(row[0])


def insert_message(
    conn: Connection, scope: str, recipients: list[str], content_id: int, *,
    keep: int = DEFAULT_MAX_PER_SCOPE,
) -> int:
    """List stored content in `scope`, drop the oldest beyond `keep`, wake waiters (at commit)."""
    row = conn.execute(
        Q["insert_message"],
        {"scope": scope, "recipients": recipients, "content_id": content_id},
    ).fetchone()
    assert row is not None
    conn.execute(Q["trim_scope"], {"scope": scope, "keep": keep})
    conn.execute(Q["notify_waiters"], {"scope": scope})
    return int(row[0])


def inbox_usage(conn: Connection) -> int:
    """Bytes the stored messages take now (raw and parsed bodies, each message once)."""
    row = conn.execute(Q["inbox_usage"]).fetchone()
    assert row is not None
    return int(row[0])


def fold_usage(conn: Connection) -> None:
    """Sum the usage deltas into one row, so that reading the figure stays cheap."""
    conn.execute(Q["fold_inbox_usage"])


def scan_scope(
    conn: Connection, scope: str, *, since: int = 0, filters: Filters = NO_FILTERS,
    limit: int = MAX_LISTED + 1,
) -> list[Seen]:
    with conn.cursor(row_factory=class_row(Seen)) as cur:
        return cur.execute(Q["scan_scope"], scan_params(scope, since, filters, limit)).fetchall()


def describe_messages(conn: Connection, ids: list[int], *,
                      bodies: bool = False) -> list[InboxMessage]:
    """The messages `ids`, oldest first: with their bodies, or (a listing) only their sizes."""
    with conn.cursor(row_factory=class_row(InboxMessage)) as cur:
        return cur.execute(Q["describe_messages"], {"ids": ids, "bodies": bodies}).fetchall()


def list_messages(
    conn: Connection, scope: str, *, since: int = 0, limit: int = MAX_LISTED,
    filters: Filters = NO_FILTERS, bodies: bool = True,
) -> Page:
    """One page, oldest first; bodies inlined within the answer's byte budget."""
    seen = scan_scope(conn, scope, since=since, filters=filters, limit=limit + 1)
    summaries = describe_messages(conn, [message.id for message in seen[:limit]])
    more = len(seen) > limit
    chosen = ids_to_inline(summaries) if bodies else []
    found: dict[int, tuple[str | None, str | None]] = {}
    if chosen:
        for inbox_id, text, html in conn.execute(Q["get_bodies"], {"ids": chosen}):
            found[inbox_id] = (text, html)
    return Page(with_bodies(summaries, found), more)


def get_message(conn: Connection, scope: str, message_id: int) -> InboxMessage | None:
    """One message of a scope, bodies included; None when the scope does not hold it."""
    params = {"scope": scope, "id": message_id, "retention_seconds": RETENTION_SECONDS}
    if conn.execute(Q["find_message"], params).fetchone() is None:
        return None
    found = describe_messages(conn, [message_id], bodies=True)
    return found[0] if found else None


def get_raw_message(conn: Connection, scope: str, message_id: int) -> bytes | None:
    params = {"scope": scope, "id": message_id, "retention_seconds": RETENTION_SECONDS}
    row = conn.execute(Q["get_raw_message"], params).fetchone()
    return bytes(row[0]) if row else None


def list_scopes(conn: Connection, limit: int = 50) -> list[ScopeSummary]:
    """The most recently written scopes, newest first."""
    params = {"limit": limit, "retention_seconds": RETENTION_SECONDS}
    with conn.cursor(row_factory=class_row(ScopeSummary)) as cur:
        return cur.execute(Q["list_scopes"], params).fetchall()


def delete_scope(conn: Connection, scope: str) -> int:
    """Empty a scope; its live pages and streams hear of it."""
    with conn.transaction():
        deleted = conn.execute(Q["delete_scope"], {"scope": scope}).rowcount
        conn.execute(Q["notify_waiters"], {"scope": scope})
    return deleted


def delete_message(conn: Connection, scope: str, message_id: int) -> bool:
    """Delete one message of a scope; False when the scope has no such message."""
    with conn.transaction():
        deleted = conn.execute(Q["delete_message"], {"scope": scope, "id": message_id}).rowcount
        conn.execute(Q["notify_waiters"], {"scope": scope})
    return bool(deleted)


def prune_messages(conn: Connection, retention_seconds: int = RETENTION_SECONDS) -> int:
    """Delete messages past retention (and contents no scope keeps); returns how many messages."""
    pruned = conn.execute(Q["prune_messages"], {"retention_seconds": retention_seconds}).rowcount
    conn.execute(Q["free_orphan_contents"])
    fold_usage(conn)
    if pruned:
        # The live pages drop what was pruned now, not at the next mail.
        conn.execute(Q["notify_pruned"])
    return pruned


def duplicate_groups(messages: list[Seen] | list[InboxMessage]) -> list[list[int]]:
    """Ids of messages sharing a Message-ID (re-sends of one job), one group per Message-ID."""
    groups: dict[str, list[int]] = defaultdict(list)
    for message in messages:
        if message.message_id:
            groups[message.message_id].append(message.id)
    return [ids for ids in groups.values() if len(ids) > 1]
