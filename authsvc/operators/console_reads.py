"""What the console's pages read beyond the outbox's own read side (console_reads.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.bounces.suppressions import Suppression
from authsvc.db.queries import load_queries
from authsvc.outbox.admin import JobSummary

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class Minute:
    minute: datetime
    sent: int
    failed: int


@dataclass(frozen=True)
class FailingTarget:
    id: UUID
    name: str
    webhook_url: str | None
    failed: int
    retrying: int
    last_error: str | None


@dataclass(frozen=True)
class WebhookHealth:
    app_id: UUID
    sent: int
    failed: int
    pending: int


@dataclass(frozen=True)
class JobRow(JobSummary):
    """A job as `outbox list` shows it, and whether it is an email or an event."""

    kind: str


def outcomes_per_minute(conn: Connection, now: datetime) -> list[Minute]:
    """Sent and failed per minute over the hour before `now` (minutes with neither left out)."""
    with conn.cursor(row_factory=class_row(Minute)) as cur:
        return cur.execute(Q["outcomes_per_minute"], {"since": now - timedelta(hours=1)}).fetchall()


@dataclass(frozen=True)
class QueueClock:
    now: datetime  # the database's time: what due times and trail rows are written in
    oldest_due_seconds: float  # how long the oldest due job has waited; 0 when none is due


def queue_clock(conn: Connection) -> QueueClock:
    """The database's time and the queue's lag, in one statement."""
    with conn.cursor(row_factory=class_row(QueueClock)) as cur:
        clock = cur.execute(Q["queue_clock"]).fetchone()
    assert clock is not None  # an aggregate: always one row
    return clock


def failing_webhook_targets(conn: Connection, now: datetime) -> list[FailingTarget]:
    with conn.cursor(row_factory=class_row(FailingTarget)) as cur:
        return cur.execute(Q["failing_webhook_targets"],
                           {"since": now - timedelta(days=1)}).fetchall()


def webhook_health(conn: Connection, now: datetime) -> dict[UUID, WebhookHealth]:
    with conn.cursor(row_factory=class_row(WebhookHealth)) as cur:
        rows = cur.execute(Q["webhook_health"], {"since": now - timedelta(days=1)}).fetchall()
    return {row.app_id: row for row in rows}


def find_jobs(
    conn: Connection, *, status: str | None, kind: str | None, recipient: str | None,
    before_id: int | None, limit: int,
) -> list[JobRow]:
    params = {"status": status, "kind": kind, "recipient": recipient, "before_id": before_id,
              "limit": limit}
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(Q["find_jobs"], params).fetchall()


def account_emails(conn: Connection, user_id: int, limit: int = 20) -> list[JobRow]:
    with conn.cursor(row_factory=class_row(JobRow)) as cur:
        return cur.execute(Q["account_emails"], {"user_id": user_id, "limit": limit}).fetchall()


def find_suppressions(conn: Connection, search: str | None, limit: int = 200) -> list[Suppression]:
    with conn.cursor(row_factory=class_row(Suppression)) as cur:
        return cur.execute(Q["find_suppressions"], {"search": search, "limit": limit}).fetchall()
