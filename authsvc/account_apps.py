"""Whose account is it (SPEC §14): the account_apps table, over sql/account_apps.sql.

An account belongs to the app it signed up through and to every app through
which it completed a flow (redeemed a link or code that app's call sent).
Only for its own accounts does an app's `redirect_url` take effect; any other
account's email opens authsvc's pages. Rows are written in the transaction
of the signup or the redemption that earns them (migrations/0021).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from uuid import UUID

from psycopg import Connection

from authsvc.queries import load_queries

Q = load_queries(Path(__file__).parent / "sql" / "account_apps.sql")


def note_signup(conn: Connection, *, user_id: int, app_id: UUID, now: datetime) -> bool:
    """Record a signup through `app_id` (the account is its if this signup created it).

    Returns whether the account belongs to the app, so whether its redirect applies.
    """
    row = conn.execute(Q["note_signup"],
                       {"user_id": user_id, "app_id": app_id, "now": now}).fetchone()
    assert row is not None
    return bool(row[0])


def note_completed_flow(
    conn: Connection, *, user_id: int, app_id: UUID | None, first_proof: bool, now: datetime
) -> None:
    """Record a redeemed link or code that `app_id`'s call sent (None: the pages').

    `first_proof`: the address was unproven until this redemption; the
    memberships unproven signups gave, other than `app_id`'s, end with it.
    """
    conn.execute(Q["note_completed_flow"], {"user_id": user_id, "app_id": app_id,
                                            "first_proof": first_proof, "now": now})
