"""The email_changes table: one row per confirmed address change, what its undo link restores.

An undo link (purpose email_revert) names its row by (user, version). It is
exempt from "newest only" (SPEC §12): the row stands until its link is used
or an undo to an older address ends it with every later change, so the
oldest proven address wins whatever order undo links are used in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class EmailChange:
    user_id: int
    version: int  # the undo link's version
    old_email: str  # where the undo link went, and what it restores
    new_email: str
    changed_at: datetime  # the undo link's issued_at
    ended_at: datetime | None
    ended_by: str | None  # "undone" (its link was used) or "voided" (an older undo ended it)

    @property
    def standing(self) -> bool:
        return self.ended_at is None


def find_change(conn: Connection, user_id: int, version: int) -> EmailChange | None:
    with conn.cursor(row_factory=class_row(EmailChange)) as cur:
        return cur.execute(Q["find_change"], {"user_id": user_id, "version": version}).fetchone()


def list_changes(conn: Connection, user_id: int) -> list[EmailChange]:
    with conn.cursor(row_factory=class_row(EmailChange)) as cur:
        return cur.execute(Q["list_changes"], {"user_id": user_id}).fetchall()


def oldest_live_undo_address(conn: Connection, user_id: int, issued_after: datetime) -> str | None:
    """The oldest address holding an undo link issued after `issued_after` that still stands."""
    params = {"user_id": user_id, "issued_after": issued_after}
    row = conn.execute(Q["oldest_live_undo_address"], params).fetchone()
    return row[0] if row else None


def account_addresses(conn: Connection, user_id: int) -> list[str]:
    """Every address the account held or was mailed at (what a deletion must redact)."""
    return [row[0] for row in conn.execute(Q["account_addresses"], {"user_id": user_id})]
