"""The suppression list: addresses that hard-bounced or complained get no more mail.

Written by the provider webhook (authsvc/bounces/provider_notifications.py), read by the
worker's claim (it ends a suppressed address's jobs `suppressed`), managed by
operators (`authsvc suppressions`). Nothing else lifts a suppression: not a
successful reset or verification by the address's owner (a click proves the
mailbox works now, not that the provider will stop reporting it), only an
operator's `remove`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))
# A day, far past the signature tolerance (5 minutes): enough to catch every replay.
WEBHOOK_ID_KEEP_SECONDS = 86400


@dataclass(frozen=True)
class Suppression:
    address: str
    event: str
    provider: str
    provider_message_id: str | None
    detail: str | None
    suppressed_at: datetime


def suppress(conn: Connection, address: str, *, event: str, provider: str,
             provider_message_id: str | None, detail: str | None = None) -> bool:
    """Add `address` (canonical); False if it was already suppressed."""
    cur = conn.execute(Q["suppress"], {"address": address, "event": event, "provider": provider,
                                       "provider_message_id": provider_message_id,
                                       "detail": detail})
    return cur.rowcount == 1


def list_suppressions(conn: Connection) -> list[Suppression]:
    with conn.cursor(row_factory=class_row(Suppression)) as cur:
        return cur.execute(Q["list_suppressions"]).fetchall()


def remove_suppression(conn: Connection, address: str) -> bool:
    """Lift the suppression of `address`; False if it was not suppressed."""
    return conn.execute(Q["remove_suppression"], {"address": address}).fetchone() is not None


def first_sight_of_webhook(conn: Connection, provider: str, message_id: str) -> bool:
    """Remember a webhook message id; False if it was seen before (a replay)."""
    conn.execute(Q["prune_webhook_messages"], {"keep_seconds": WEBHOOK_ID_KEEP_SECONDS})
    row = conn.execute(Q["remember_webhook_message"],
                       {"provider": provider, "message_id": message_id}).fetchone()
    return row is not None


def forget_webhook(conn: Connection, provider: str, message_id: str) -> None:
    """Undo `first_sight_of_webhook`, so the provider's retry is handled afresh."""
    conn.execute(Q["forget_webhook_message"], {"provider": provider, "message_id": message_id})
