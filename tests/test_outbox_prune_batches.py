"""`authsvc outbox prune` deletes in short batches, oldest first (issue 15: a 10M-row outbox)."""

from __future__ import annotations

import threading

import psycopg

from authsvc.outbox.admin import prune_jobs
from tests.worker_support import queue_notices


def _age(conn: psycopg.Connection, ids: list[int], status: str, days: int) -> None:
    conn.execute(
        "UPDATE email_jobs SET status = %s, created_at = now() - make_interval(days => %s)"
        " WHERE id = ANY(%s)", (status, days, ids)
    )


def test_prune_deletes_every_old_finished_job_in_batches_and_nothing_else(conn):
    ids = queue_notices(conn, 12)
    _age(conn, ids[:7], "sent", 40)
    _age(conn, ids[7:9], "failed", 40)
    _age(conn, ids[9:10], "pending", 40)  # old but not finished: kept
    _age(conn, ids[10:], "sent", 1)  # finished but recent: kept

    conn.execute("INSERT INTO email_job_events (job_id, event) SELECT id, 'claimed'"
                 " FROM email_jobs")
    assert prune_jobs(conn, 30 * 86400, batch=2) == 9
    left = [row[0] for row in conn.execute("SELECT id FROM email_jobs ORDER BY id")]
    assert left == ids[9:]
    # A pruned job's trail goes with it; the kept jobs keep theirs (migrations/0014).
    trails = [row[0] for row in conn.execute("SELECT job_id FROM email_job_events ORDER BY job_id")]
    assert trails == ids[9:]


def test_each_batch_commits_on_its_own(conn, database_url):
    """A reader sees the first batches gone while a later one is still held open."""
    ids = queue_notices(conn, 6)
    for older, job_id in enumerate(reversed(ids)):  # the last job is the youngest
        _age(conn, [job_id], "sent", 40 + older)
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as blocker:
        # Hold the youngest job's row: the last batch waits for it, the first ones do not.
        blocker.execute("BEGIN")
        blocker.execute("SELECT id FROM email_jobs WHERE id = %s FOR UPDATE", (ids[-1],))
        pruning = threading.Thread(target=lambda: prune_jobs_in_own_connection(database_url))
        pruning.start()
        deadline_rounds = 200
        remaining = 6
        for _ in range(deadline_rounds):
            remaining = conn.execute("SELECT count(*) FROM email_jobs").fetchone()[0]
            if remaining <= 2:
                break
            pruning.join(0.05)
        assert remaining <= 2, "the earlier batches were not committed on their own"
        blocker.execute("ROLLBACK")
    pruning.join(30)
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (0,)


def prune_jobs_in_own_connection(url: str) -> None:
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as own:
        prune_jobs(own, 30 * 86400, batch=2)
