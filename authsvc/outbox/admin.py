"""The outbox's read side and repairs: stats, listings, trails, totals, redrive and prune.

`authsvc outbox …` and /metrics both read the outbox through this module, so
what an operator sees and what Prometheus scrapes are the same figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from uuid import UUID

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class OutboxStats:
    """Counts per status; `due` and `leased` by the claim's own rules."""

    pending: int
    due: int
    leased: int
    sent: int
    failed: int
    superseded: int
    expired: int
    suppressed: int
    oldest_pending_seconds: float


@dataclass(frozen=True)
class JobSummary:
    id: int
    status: str
    template: str
    recipient: str
    attempt_count: int
    created_at: datetime
    next_attempt_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    sent_at: datetime | None
    last_error: str | None


@dataclass(frozen=True)
class JobDetail(JobSummary):
    user_id: int | None
    purpose: str | None
    token_version: int | None
    issued_at: datetime | None
    provider_message_id: str | None
    public_id: UUID | None  # in the email's Message-ID and X-Authsvc-Job; None for old jobs


@dataclass(frozen=True)
class JobEvent:
    id: int
    event: str
    lease_owner: str | None
    lease_expires_at: datetime | None
    attempt: int | None
    token_version: int | None
    provider_message_id: str | None
    error: str | None
    created_at: datetime


def fold_counters(conn: Connection) -> None:
    """Add the counters' pending deltas to their totals (migrations/0011_outbox_counters.sql).

    Under a lock on outbox_counters, then in a statement of its own: its
    snapshot starts after any fold that held the lock before, so a total read
    after it never goes backwards, however many scrapes run at once.
    """
    with conn.transaction():
        conn.execute(Q["lock_counters"])
        conn.execute(Q["fold_counters"])


def outbox_stats(conn: Connection) -> OutboxStats:
    """Counts per status and the age of the oldest pending job.

    Pending, due, leased and the oldest are counted live over the pending
    rows; final states come from the counters, so the cost does not grow with
    the retained jobs (docs/BENCHMARKS.md, "Big outbox").
    """
    fold_counters(conn)
    return _read_stats(conn)


def _read_stats(conn: Connection) -> OutboxStats:
    with conn.cursor(row_factory=class_row(OutboxStats)) as cur:
        stats = cur.execute(Q["outbox_stats"]).fetchone()
    assert stats is not None
    return stats


def live_outbox_stats(conn: Connection) -> OutboxStats:
    """outbox_stats counted from every row of email_jobs: exact by construction, slow when big."""
    with conn.cursor(row_factory=class_row(OutboxStats)) as cur:
        stats = cur.execute(Q["live_outbox_stats"]).fetchone()
    assert stats is not None
    return stats


def event_totals(conn: Connection) -> dict[str, int]:
    """Audit-trail events by kind since install, and `lease_expired`: claims that took over a
    dead lease. Totals: `outbox prune` deleting old trails does not lower them."""
    fold_counters(conn)
    return _read_event_totals(conn)


def _read_event_totals(conn: Connection) -> dict[str, int]:
    return {str(event): int(total) for event, total in conn.execute(Q["event_totals"])}


@dataclass(frozen=True)
class SendLatency:
    """Queue-to-accepted seconds of jobs sent since install: cumulative counts per bound,
    sum and count (a pruned job stays counted)."""

    buckets: list[tuple[float, int]]
    total_seconds: float
    sent: int


def send_latency(conn: Connection, bounds: Sequence[float]) -> SendLatency:
    """The histogram at `bounds`, each one the counters keep (outbox_latency_bounds())."""
    fold_counters(conn)
    return _read_send_latency(conn, bounds)


def _read_send_latency(conn: Connection, bounds: Sequence[float]) -> SendLatency:
    rows = conn.execute(Q["send_latency"], {"bounds": list(bounds)}).fetchall()
    missing = [float(bound) for bound, _count, kept in rows if not kept]
    if missing:
        raise ValueError(f"no latency counter for bounds {missing}: see outbox_latency_bounds()")
    buckets = [(float(bound), int(count)) for bound, count, _kept in rows]
    totals = conn.execute(Q["send_latency_totals"]).fetchone()
    assert totals is not None
    return SendLatency(buckets, float(totals[0]), int(totals[1]))


@dataclass(frozen=True)
class OutboxFigures:
    """Everything /metrics reports about the outbox, read after one fold."""

    stats: OutboxStats
    event_totals: dict[str, int]
    latency: SendLatency


def outbox_figures(conn: Connection, bounds: Sequence[float]) -> OutboxFigures:
    """Stats, event totals and the latency histogram: one fold for the three reads."""
    fold_counters(conn)
    return OutboxFigures(
        _read_stats(conn), _read_event_totals(conn), _read_send_latency(conn, bounds)
    )


def list_jobs(conn: Connection, status: str | None = None, limit: int = 50) -> list[JobSummary]:
    """Newest jobs first, optionally only those with `status`."""
    with conn.cursor(row_factory=class_row(JobSummary)) as cur:
        return cur.execute(Q["list_jobs"], {"status": status, "limit": limit}).fetchall()


def find_job(conn: Connection, job_id: int) -> JobDetail | None:
    with conn.cursor(row_factory=class_row(JobDetail)) as cur:
        return cur.execute(Q["find_job"], {"job_id": job_id}).fetchone()


def job_id_of(conn: Connection, reference: int | UUID) -> int | None:
    """The internal id of a job named by either id: the operator's or the one its email shows."""
    if isinstance(reference, int):
        return reference
    row = conn.execute(Q["job_by_public_id"], {"public_id": reference}).fetchone()
    return int(row[0]) if row else None


def job_events(conn: Connection, job_id: int) -> list[JobEvent]:
    """The audit trail of one job, oldest first."""
    with conn.cursor(row_factory=class_row(JobEvent)) as cur:
        return cur.execute(Q["job_events"], {"job_id": job_id}).fetchall()


def redrive_job(conn: Connection, job_id: int, note: str = "redriven by operator") -> bool:
    """Make a failed job pending again with fresh attempts; False if it is not failed."""
    return conn.execute(Q["redrive_job"], {"job_id": job_id, "note": note}).fetchone() is not None


PRUNE_BATCH = 10_000


def prune_jobs(conn: Connection, older_than_seconds: int, batch: int = PRUNE_BATCH) -> int:
    """Delete finished jobs older than the cutoff, `batch` per transaction; returns how many.

    At 10 million retained rows one DELETE would hold every row's lock for
    tens of seconds (docs/BENCHMARKS.md, "Big outbox"); batches of 10,000 hold
    theirs for a fraction of a second each, and a crash loses at most one.
    """
    deleted = 0
    while True:
        with conn.transaction():
            done = conn.execute(
                Q["prune_jobs"], {"older_than_seconds": older_than_seconds, "batch": batch}
            ).rowcount
        deleted += done
        if done < batch:
            return deleted
