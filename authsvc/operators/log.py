"""The operator log: every console action, who and when, in the action's own transaction.

Written with the connection the action uses, inside its `conn.transaction()`,
so an action that rolls back leaves no entry and an entry never lacks its
action. Targets name accounts by id (`account 123`), never by address: a
deleted account leaves no address behind (SPEC §12).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))
# Entries read per statement when the whole log is walked (the export).
EXPORT_PAGE = 1000


@dataclass(frozen=True)
class Actor:
    """Who acts: an operator's account, or the command line (no account)."""

    user_id: int | None
    email: str


CLI_ACTOR = Actor(None, "command line")


@dataclass(frozen=True)
class LogEntry:
    id: int
    operator_id: int | None
    operator_email: str
    action: str
    target: str
    detail: str
    created_at: datetime

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat()
        return data


def write_entry(
    conn: Connection, actor: Actor, action: str, target: str, now: datetime, detail: str = ""
) -> None:
    """Record one action; call it inside the action's transaction."""
    conn.execute(Q["write_entry"], {
        "operator_id": actor.user_id, "operator_email": actor.email, "action": action,
        "target": target, "detail": detail, "now": now,
    })


def list_entries(
    conn: Connection, limit: int = 100, before_id: int | None = None
) -> list[LogEntry]:
    """Newest first; `before_id` pages back from the previous page's last entry."""
    with conn.cursor(row_factory=class_row(LogEntry)) as cur:
        return cur.execute(Q["list_entries"], {"limit": limit, "before_id": before_id}).fetchall()


def walk_entries(conn: Connection, limit: int | None = None) -> Iterator[LogEntry]:
    """Every entry newest first (or the newest `limit`), read a page at a time by id,
    so a long log is never held whole and no cursor outlives a statement (poolers)."""
    before_id: int | None = None
    left = limit
    while left is None or left > 0:
        size = EXPORT_PAGE if left is None else min(EXPORT_PAGE, left)
        page = list_entries(conn, size, before_id)
        yield from page
        if len(page) < size:
            return
        before_id = page[-1].id
        left = None if left is None else left - len(page)
