"""`authsvc outbox prune` deletes in short batches, oldest first (issue 15: a 10M-row outbox)."""

from __future__ import annotations

import threading

import psycopg
from psycopg import sql

from authsvc.outbox.admin import Q, prune_jobs, redrive_job
from testkit.waiting import wait_until
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
    # A pruned job's trail goes with it; the kept jobs keep theirs (outbox_delete_trails).
    trails = [row[0] for row in conn.execute("SELECT job_id FROM email_job_events ORDER BY job_id")]
    assert trails == ids[9:]


def test_each_batch_commits_on_its_own(conn, database_url):
    """A reader sees the first batches gone while a later one is still held open."""
    ids = queue_notices(conn, 6)
    for older, job_id in enumerate(reversed(ids)):  # the last job is the youngest
        _age(conn, [job_id], "sent", 40 + older)
    conn.execute("INSERT INTO email_job_events (job_id, event) VALUES (%s, 'claimed')",
                 (ids[-1],))
    with psycopg.connect(database_url, autocommit=True, prepare_threshold=None) as blocker:
        # Hold the youngest job's trail: the last batch, deleting it (by the trigger
        # outbox_delete_trails), waits for it; the first ones do not. (A held job
        # the prune would pass by.)
        blocker.execute("BEGIN")
        blocker.execute("SELECT id FROM email_job_events WHERE job_id = %s FOR UPDATE",
                        (ids[-1],))
        failures: list[BaseException] = []
        pruning = threading.Thread(
            target=lambda: prune_jobs_in_own_connection(database_url, failures))
        pruning.start()

        def earlier_batches_gone() -> bool:
            assert not failures, f"the prune failed: {failures[0]!r}"
            # This test's jobs only: the count says nothing about rows it did not make.
            remaining = conn.execute("SELECT count(*) FROM email_jobs WHERE id = ANY(%s)",
                                     (ids,)).fetchone()[0]
            # The prune passes by rows another session holds: if it ended early, say who
            # held them, rather than waiting out the timeout.
            assert remaining <= 2 or pruning.is_alive(), (
                f"the prune ended with {remaining} jobs left; other sessions: "
                f"{_other_sessions(conn)}")
            return remaining <= 2

        try:
            wait_until(earlier_batches_gone, timeout=30,
                       what="the earlier batches to be committed on their own, before the last one")
        except AssertionError as timed_out:
            # Which session the prune waits for says why (a flake seen only in full runs).
            raise AssertionError(f"{timed_out}; other sessions: {_other_sessions(conn)}; "
                                 f"locks waited for: {_waiting_locks(conn)}") from None
        blocker.execute("ROLLBACK")
    pruning.join(30)
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE id = ANY(%s)", (ids,)
                        ).fetchone() == (0,)


def _other_sessions(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT pid, application_name, state, wait_event_type, left(query, 120),"
        " now() - xact_start FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchall()


def _waiting_locks(conn: psycopg.Connection) -> list[tuple[object, ...]]:
    return conn.execute(
        "SELECT w.pid, w.locktype, w.relation::regclass::text, w.mode,"
        " pg_blocking_pids(w.pid) FROM pg_locks AS w WHERE NOT w.granted").fetchall()


def prune_jobs_in_own_connection(url: str, failures: list[BaseException]) -> None:
    try:
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as own:
            prune_jobs(own, 30 * 86400, batch=2)
    except BaseException as exc:  # the test thread reports it, rather than waiting it out
        failures.append(exc)


def test_prune_leaves_a_job_that_a_redrive_makes_pending_meanwhile(direct_database_url, conn):
    [job_id] = queue_notices(conn, 1)
    _age(conn, [job_id], "failed", 40)
    pruned: list[int] = []
    with psycopg.connect(direct_database_url, autocommit=True) as redriver, \
            psycopg.connect(direct_database_url, autocommit=True) as pruner:
        with redriver.transaction():
            assert redrive_job(redriver, job_id)
            pruning = threading.Thread(
                target=lambda: pruned.append(prune_jobs(pruner, 30 * 86400)))
            pruning.start()
            # The prune either waits for the redrive or passes the row by.
            wait_until(lambda: not pruning.is_alive() or conn.execute(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                (pruner.info.backend_pid,)).fetchone() == (True,),
                what="the prune to finish or wait for the redrive")
        pruning.join(30)
    assert pruned == [0]
    assert conn.execute("SELECT status FROM email_jobs WHERE id = %s", (job_id,)).fetchone() \
        == ("pending",)
    assert conn.execute("SELECT total FROM outbox_counter_totals() WHERE name = 'jobs_pending'"
                        ).fetchall() == []


# The planner's choices that make `id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)` a
# semi join rescanning its subquery: each rescan skips the rows the statement has
# already deleted and takes the next ones. Statistics seen in full test runs led the
# planner there by itself; these settings lead it there every time.
RESCANNING_PLAN = ("enable_hashjoin", "enable_mergejoin", "enable_material", "enable_memoize",
                   "enable_hashagg", "enable_sort", "enable_indexscan", "enable_bitmapscan")


def test_a_batch_is_never_more_than_its_size_whatever_the_plan(direct_database_url, conn):
    ids = queue_notices(conn, 6)
    conn.execute("ANALYZE email_jobs")  # as last seen, every job pending: few finished ones
    _age(conn, ids, "sent", 40)
    with psycopg.connect(direct_database_url, autocommit=True) as pruner:
        for setting in RESCANNING_PLAN:
            pruner.execute(sql.SQL("SET {} = off").format(sql.Identifier(setting)))
        with pruner.transaction():
            deleted = pruner.execute(
                Q["prune_jobs"], {"older_than_seconds": 30 * 86400, "batch": 2}).fetchone()
        assert deleted == (2,)
        assert conn.execute("SELECT count(*) FROM email_jobs WHERE id = ANY(%s)", (ids,)
                            ).fetchone() == (4,)
        assert prune_jobs(pruner, 30 * 86400, batch=2) == 4
