"""The worker's two hot statements read the rows they touch, not the outbox or its trail.

A new install's tables have the statistics of empty ones until autovacuum
catches up, and a plan that looks cheap for an empty table can read every
row per job. These tests count the rows PostgreSQL actually read
(pg_stat_user_tables), so they hold whatever plan the statistics suggest.
"""

from __future__ import annotations

import psycopg

from authsvc.worker.jobs import Outcome, claim_batch, record_outcomes
from tests.worker_support import queue_notices


def _rows_read(conn: psycopg.Connection, table: str) -> int:
    """Rows `table` has returned to scans so far, this backend's included."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens as a statement ends
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
        " FROM pg_stat_user_tables WHERE relname = %s", (table,)).fetchone()
    assert row is not None
    return int(row[0])


def _young_outbox(conn: psycopg.Connection, jobs: int) -> None:
    queue_notices(conn, jobs)
    conn.execute("VACUUM ANALYZE")  # what a new install's statistics say: nearly empty


def test_a_claim_does_not_read_the_trail_once_per_job(conn):
    """Counting expired leases once looked up each claimed job's previous event."""
    _young_outbox(conn, 240)
    for _ in range(5):  # a trail of 400 events
        claimed = claim_batch(conn, "drain", 40, 30)
        assert all(record_outcomes(conn, [Outcome(job, "sent") for job in claimed]))
    row = conn.execute("SELECT count(*) FROM email_job_events").fetchone()
    assert row is not None
    trail = row[0]

    before = _rows_read(conn, "email_job_events")
    assert len(claim_batch(conn, "reader", 40, 30)) == 40
    read = _rows_read(conn, "email_job_events") - before

    # The claim looks for earlier 'ambiguous' events: by index, or in one
    # pass over a small trail at most; never a pass per claimed job.
    assert read <= trail, f"a claim of 40 read {read} trail rows (the trail has {trail})"


def test_recording_a_batch_reads_only_its_own_jobs(conn):
    """The outcome join alone let the planner scan every pending job per batch."""
    _young_outbox(conn, 2000)
    claimed = claim_batch(conn, "recorder", 40, 30)

    before = _rows_read(conn, "email_jobs")
    assert all(record_outcomes(conn, [Outcome(job, "sent") for job in claimed]))
    read = _rows_read(conn, "email_jobs") - before

    assert read <= 2 * len(claimed), f"recording 40 outcomes read {read} outbox rows"
