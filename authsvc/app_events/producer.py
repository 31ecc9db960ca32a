"""Events for embedding apps (SPEC §9): queue one webhook delivery in the caller's transaction.

An event goes to the app that started the flow (its API key queued the
email), and only when that app is live and has a webhook URL. Queued in the
same transaction as the change it reports, so it exists exactly when the
change committed; the worker delivers it like an email (authsvc/worker/event_delivery.py).
`email.delivered` and `email.failed` are queued by the statement that
records the email's outcome (authsvc/worker/jobs.sql record_outcomes), for the same
reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from authsvc.db.queries import load_queries
from authsvc.outbox import notify_workers

Q = load_queries(Path(__file__).with_suffix(".sql"))
EVENT_TYPES = (
    "user.verified", "user.password_changed", "email.delivered", "email.failed",
    "user.email_changed", "user.email_restored", "user.deleted",
)


@dataclass(frozen=True)
class FlowApp:
    """The app whose API call sent a link version (events.sql flow_app)."""

    id: UUID
    name: str
    own_account: bool  # the account was already this app's when the email was queued


def flow_app(conn: Connection, *, user_id: int, purpose: str, version: int) -> FlowApp | None:
    """The app whose API call sent this link version, if any."""
    row = conn.execute(
        Q["flow_app"], {"user_id": user_id, "purpose": purpose, "version": version}
    ).fetchone()
    return FlowApp(row[0], row[1], bool(row[2])) if row else None


def queue_event(
    conn: Connection,
    *,
    app_id: UUID | None,
    event_type: str,
    data: dict[str, Any],
    user_id: int | None,
    now: datetime,
) -> int | None:
    """Queue `event_type` for `app_id`; the job id, or None when the app takes no events."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    if app_id is None:
        return None
    params = {
        "app_id": app_id,
        "type": event_type,
        "happened_at": now,
        "data": Jsonb(data),
        "user_id": user_id,
    }
    row = conn.execute(Q["queue_event"], params).fetchone()
    if row is None:
        return None
    notify_workers(conn)
    return int(row[0])


def queue_account_event(
    conn: Connection,
    *,
    user_id: int,
    event_type: str,
    data: dict[str, Any],
    now: datetime,
    account_deleted: bool = False,
) -> list[int]:
    """Queue `event_type` for every app the account belongs to; the job ids.

    `account_deleted`: the caller's transaction deletes the account, so the
    deliveries name no account row (its id is in `data`).
    """
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    params = {
        "user_id": user_id,
        "job_user_id": None if account_deleted else user_id,
        "type": event_type,
        "happened_at": now,
        "data": Jsonb(data),
    }
    queued = [int(row[0]) for row in conn.execute(Q["queue_account_event"], params)]
    if queued:
        notify_workers(conn)
    return queued


def user_data(user_id: int, email: str) -> dict[str, Any]:
    """The `data` of the user.* events."""
    return {"user": {"id": str(user_id), "email": email}}
