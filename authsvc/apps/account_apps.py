"""Whose account is it (SPEC §14): the account_apps table, over account_apps.sql.

An account belongs to the app it signed up through and to every app through
which it completed a flow. A flow is *through an app* when the email
redeemed was queued by that app's call while the account was already the
app's, so that its redirect applied (the job's payload records it,
`OWN_ACCOUNT`): completing a flow never makes an app a member, whatever the
email said. Only for its own accounts does an app's `redirect_url` take
effect; any other account's email opens authsvc's pages. The signup's row
counts only while the address is unproven and uncontested, and survives the
address's first proof only when the proving email was that app's own
(account_apps in migrations/0026_baseline.sql).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from uuid import UUID

from psycopg import Connection

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))

# The payload key of an email queued while the account was already the asking
# app's (true or absent): only redeeming such an email is a flow through the app.
OWN_ACCOUNT = "own_account"


def note_signup(conn: Connection, *, user_id: int, app_id: UUID, now: datetime) -> bool:
    """Record a signup through `app_id` (the account is its if this signup created it).

    Returns whether the account belongs to the app, so whether its redirect applies.
    """
    row = conn.execute(Q["note_signup"],
                       {"user_id": user_id, "app_id": app_id, "now": now}).fetchone()
    assert row is not None
    return bool(row[0])


def note_first_proof(conn: Connection, *, user_id: int, own_app: UUID | None) -> None:
    """The address was unproven until this redemption: only `own_app` keeps the account.

    `own_app`: the app whose own email (queued while the account was its)
    was redeemed, or None (the pages', another app's, or sent once contested).
    """
    conn.execute(Q["note_first_proof"], {"user_id": user_id, "own_app": own_app})


def belongs_to_app(conn: Connection, *, user_id: int, app_id: UUID) -> bool:
    """Whether the account is the app's now (its redirect applies, its email is its own)."""
    row = conn.execute(Q["belongs_to_app"], {"user_id": user_id, "app_id": app_id}).fetchone()
    return bool(row and row[0])
