"""The inbox_messages table: typed wrappers over inbox.sql."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from authsvc.inbox.parsing import ParsedMessage
from authsvc.sql import load_queries

Q = load_queries(Path(__file__).parent / "inbox.sql")
NOTIFY_CHANNEL = "authsvc_inbox"
RETENTION_SECONDS = 24 * 3600
MAX_LISTED = 500


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
        }


def insert_message(
    conn: Connection, scope: str, recipients: list[str], parsed: ParsedMessage, raw: bytes,
    envelope_sender: str | None,
) -> int:
    """Store a message in `scope` and wake its waiters; both take effect at commit."""
    row = conn.execute(
        Q["insert_message"],
        {
            "scope": scope,
            "mail_from": parsed.sender or envelope_sender,
            "recipients": recipients,
            "subject": parsed.subject,
            "message_id": parsed.message_id,
            "headers": Jsonb(parsed.headers),
            "text_body": parsed.text,
            "html_body": parsed.html,
            "links": parsed.links,
            "raw": raw,
        },
    ).fetchone()
    assert row is not None
    conn.execute(Q["notify_waiters"], {"scope": scope})
    return int(row[0])


def list_messages(
    conn: Connection, scope: str, *, since: int = 0, limit: int = MAX_LISTED
) -> list[InboxMessage]:
    params = {"scope": scope, "since": since, "limit": limit}
    params["retention_seconds"] = RETENTION_SECONDS
    with conn.cursor(row_factory=class_row(InboxMessage)) as cur:
        return cur.execute(Q["list_messages"], params).fetchall()


def get_message(conn: Connection, scope: str, message_id: int) -> InboxMessage | None:
    params = {"scope": scope, "id": message_id, "retention_seconds": RETENTION_SECONDS}
    with conn.cursor(row_factory=class_row(InboxMessage)) as cur:
        return cur.execute(Q["get_message"], params).fetchone()


def get_raw_message(conn: Connection, scope: str, message_id: int) -> bytes | None:
    params = {"scope": scope, "id": message_id, "retention_seconds": RETENTION_SECONDS}
    row = conn.execute(Q["get_raw_message"], params).fetchone()
    return bytes(row[0]) if row else None


def delete_scope(conn: Connection, scope: str) -> int:
    return conn.execute(Q["delete_scope"], {"scope": scope}).rowcount


def prune_messages(conn: Connection, retention_seconds: int = RETENTION_SECONDS) -> int:
    """Delete messages past retention; returns how many."""
    return conn.execute(Q["prune_messages"], {"retention_seconds": retention_seconds}).rowcount


def duplicate_groups(messages: list[InboxMessage]) -> list[list[int]]:
    """Ids of messages sharing a Message-ID (re-sends of one job), one group per Message-ID."""
    groups: dict[str, list[int]] = defaultdict(list)
    for message in messages:
        if message.message_id:
            groups[message.message_id].append(message.id)
    return [ids for ids in groups.values() if len(ids) > 1]
