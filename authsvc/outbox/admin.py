"""The outbox's read side and repairs: stats, listings, trails, totals, redrive and prune.

`authsvc outbox …` and /metrics both read the outbox through this module, so
what an operator sees and what Prometheus scrapes are the same figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from uuid import UUID

import psycopg
from psycopg import Connection
from psycopg.pq import TransactionStatus
from psycopg.rows import class_row

from authsvc.db.queries import load_queries
from authsvc.outbox.rules import STATUSES

Q = load_queries(Path(__file__).with_suffix(".sql"))
FINAL_STATUSES = tuple(status for status in STATUSES if status != "pending")


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
    cancelled: int
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


def fold_counters(conn: Connection) -> bool:
    """Add the counters' deltas to their totals (migrations/0026_baseline.sql); False if another
    process is folding right now (it takes these deltas too).

    The worker calls this about once a second and `outbox prune` when done, so
    the deltas stay few whether or not anyone scrapes; no read needs it.
    """
    with conn.transaction():
        row = conn.execute(Q["lock_counters"]).fetchone()
        if not (row and row[0]):
            return False
        conn.execute(Q["fold_counters"])
    return True


@dataclass(frozen=True)
class Recount:
    """One final status whose counter a recount set to the jobs there are."""

    status: str
    counted: int  # what outbox_stats said before
    live: int  # the jobs with this status, and the counter now


def recount_jobs(conn: Connection) -> list[Recount]:
    """Set each final status's counter to the jobs that have it; the corrections made.

    For jobs no statement counted: recorded by a worker older than the statements'
    counting (migration 0024, before the baseline), or changed by a hand-made
    UPDATE (a prune of them drives a total below zero). Under the fold's lock,
    waiting for a fold under way: a fold committing after the recount read the
    deltas would add them twice. Counts every row, so it takes as long as `live_outbox_stats`.
    """
    with conn.transaction(), conn.cursor(row_factory=class_row(Recount)) as cur:
        cur.execute(Q["wait_for_counters"])
        return cur.execute(Q["recount_jobs"], {"statuses": list(FINAL_STATUSES)}).fetchall()


def outbox_stats(conn: Connection) -> OutboxStats:
    """Counts per status and the age of the oldest pending job.

    Pending, due, leased and the oldest are counted live over the pending
    rows; final states come from the counters, so the cost does not grow with
    the retained jobs (docs/worker.md, "Where the figures come from").
    """
    return _read(conn).stats()


def live_outbox_stats(conn: Connection) -> OutboxStats:
    """outbox_stats counted from every row of email_jobs: exact by construction, slow when big."""
    with conn.cursor(row_factory=class_row(OutboxStats)) as cur:
        stats = cur.execute(Q["live_outbox_stats"]).fetchone()
    assert stats is not None
    return stats


@dataclass(frozen=True)
class SendLatency:
    """Queue-to-accepted seconds of jobs sent since install: cumulative counts per bound,
    sum and count (a pruned job stays counted)."""

    buckets: list[tuple[float, int]]
    total_seconds: float
    sent: int


@dataclass(frozen=True)
class OutboxFigures:
    """Everything /metrics reports about the outbox."""

    stats: OutboxStats
    event_totals: dict[str, int]
    latency: SendLatency


def event_totals(conn: Connection) -> dict[str, int]:
    """Audit-trail events by kind since install, and `lease_expired`: claims that took over a
    dead lease. Totals: `outbox prune` deleting old trails does not lower them."""
    return _read(conn).events()


def send_latency(conn: Connection, bounds: Sequence[float]) -> SendLatency:
    """The histogram at `bounds`, each one the counters keep (outbox_latency_bounds())."""
    return _read(conn).latency(bounds)


def outbox_figures(conn: Connection, bounds: Sequence[float]) -> OutboxFigures:
    """Stats, event totals and the latency histogram at `bounds`, from one read."""
    reading = _read(conn)
    return OutboxFigures(reading.stats(), reading.events(), reading.latency(bounds))


@dataclass(frozen=True)
class _Reading:
    pending: tuple[int, int, int, float]  # pending, due, leased, oldest pending seconds
    totals: dict[str, tuple[int, float]]  # counter name: (total, seconds)
    bounds: list[tuple[float, str]]  # the histogram's bounds, each with its bucket's counter

    def stats(self) -> OutboxStats:
        pending, due, leased, oldest = self.pending
        final = {status: self.totals.get("jobs_" + status, (0, 0.0))[0]
                 for status in FINAL_STATUSES}
        return OutboxStats(pending=pending, due=due, leased=leased, **final,
                           oldest_pending_seconds=oldest)

    def events(self) -> dict[str, int]:
        prefix = "events_"
        return {name.removeprefix(prefix): total for name, (total, _s) in self.totals.items()
                if name.startswith(prefix) and total != 0}

    def latency(self, bounds: Sequence[float]) -> SendLatency:
        # Each bucket counts the sends above the bound below it, at most its own:
        # the cumulative count at a bound is the running sum up to it.
        cumulative: dict[float, int] = {}
        running = 0
        for bound, name in self.bounds:
            running += self.totals.get(name, (0, 0.0))[0]
            cumulative[bound] = running
        missing = [float(bound) for bound in bounds if float(bound) not in cumulative]
        if missing:
            raise ValueError(
                f"no latency counter for bounds {missing}: see outbox_latency_bounds()")
        sent, seconds = self.totals.get("send_latency", (0, 0.0))
        return SendLatency([(float(b), cumulative[float(b)]) for b in sorted(bounds)],
                           seconds, sent)


def _read(conn: Connection) -> _Reading:
    """The live pending side, every counter and the histogram's bounds, in one round trip
    (pipelined: on a busy host each round trip waits its turn for a core, twice)
    and one snapshot: a job sent between two reads would be counted pending and sent."""
    # Inside a caller's transaction, that transaction's snapshots are the ones there are.
    # BEGIN and COMMIT by hand: conn.transaction() in a pipeline adds syncs, round trips.
    own = conn.info.transaction_status == TransactionStatus.IDLE
    try:
        with conn.pipeline():
            if own:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            pending = conn.execute(Q["pending_figures"])
            totals = conn.execute(Q["counter_totals"])
            bounds = conn.execute(Q["latency_bounds"])
            if own:
                conn.execute("COMMIT")
    except BaseException:
        if own and conn.info.transaction_status != TransactionStatus.IDLE:
            with suppress(psycopg.Error):  # a dead connection: the first error tells it
                conn.rollback()
        raise
    row = pending.fetchone()
    assert row is not None
    return _Reading(
        (int(row[0]), int(row[1]), int(row[2]), float(row[3])),
        {str(name): (int(total), float(seconds)) for name, total, seconds in totals},
        [(float(bound), str(name)) for bound, name in bounds],
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


def sent_to(conn: Connection, address: str, *, message_id: str | None,
            public_job_id: str | None, within_seconds: float) -> bool:
    """Whether authsvc sent `address` the email a provider names by these ids, within
    the last `within_seconds` (counted from its send).

    Each id given must be the sent job's (the provider's message id as its send
    answer gave it, the job's public id as the message carried it); with
    neither, no email matches.
    """
    row = conn.execute(Q["sent_to"], {"address": address, "message_id": message_id,
                                      "public_job_id": public_job_id,
                                      "within_seconds": within_seconds}).fetchone()
    return row is not None


def job_events(conn: Connection, job_id: int) -> list[JobEvent]:
    """The audit trail of one job, oldest first."""
    with conn.cursor(row_factory=class_row(JobEvent)) as cur:
        return cur.execute(Q["job_events"], {"job_id": job_id}).fetchall()


def redrive_job(conn: Connection, job_id: int, note: str = "redriven by operator") -> bool:
    """Make a failed job pending again with fresh attempts; False if it is not failed."""
    return conn.execute(Q["redrive_job"], {"job_id": job_id, "note": note}).fetchone() is not None


def cancel_job(conn: Connection, job_id: int, note: str = "cancelled by operator") -> bool:
    """Stop a failed job, or a pending one no worker is sending; False for any other."""
    return conn.execute(Q["cancel_job"], {"job_id": job_id, "note": note}).fetchone() is not None


PRUNE_BATCH = 10_000


def prune_jobs(conn: Connection, older_than_seconds: int, batch: int = PRUNE_BATCH) -> int:
    """Delete finished jobs older than the cutoff, `batch` per transaction; returns how many.

    At 10 million retained rows one DELETE would hold every row's lock for
    tens of seconds (docs/BENCHMARKS.md, "Big outbox"); batches of 10,000 hold
    theirs for a fraction of a second each, and a crash loses at most one.
    Each batch writes its counter deltas; the fold at the end takes them in.
    """
    deleted = 0
    while True:
        with conn.transaction():
            row = conn.execute(
                Q["prune_jobs"], {"older_than_seconds": older_than_seconds, "batch": batch}
            ).fetchone()
        done = int(row[0]) if row else 0
        deleted += done
        if done < batch:
            fold_counters(conn)
            return deleted
