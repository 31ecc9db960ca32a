"""The batched completer (issue 11): lease guard per row, group commit, the unrecorded cap."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import Counter

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import ConnectionPool

from authsvc.db.connections import create_pool
from authsvc.worker import jobs
from authsvc.worker.completer import Completer
from authsvc.worker.jobs import Outcome
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.race_support import wait_until_waiting_on_a_lock
from tests.worker_support import (
    FAR,
    events,
    expire_lease,
    expire_leases,
    job_status,
    queue_notices,
    start_worker_process,
)


@pytest.fixture
def unchecked_pool(database_url):
    pool = create_pool(database_url, min_size=1, max_size=3, check=False)
    yield pool
    pool.close()


def test_a_lost_lease_in_a_batch_records_nothing_for_that_row(conn, caplog):
    """One statement, three outcomes: the row whose lease moved on is left alone."""
    ids = queue_notices(conn, 3)
    caplog.set_level(logging.INFO, logger="authsvc.worker")
    claimed = {j.id: j for j in jobs.claim_batch(conn, "host:1:a", 3, lease_seconds=30)}
    # Job 2's lease runs out and another worker takes it over; 1 and 3 keep theirs.
    expire_lease(conn, ids[1])
    [taken] = jobs.claim_batch(conn, "host:2:b", 1, lease_seconds=30)
    assert taken.id == ids[1]
    before = conn.execute("SELECT * FROM email_jobs WHERE id = %s", (ids[1],)).fetchone()

    outcomes = [Outcome(claimed[i], "sent", provider_message_id=f"<m{i}@x>") for i in ids]
    assert jobs.record_outcomes(conn, outcomes) == [True, False, True]

    assert conn.execute("SELECT * FROM email_jobs WHERE id = %s", (ids[1],)).fetchone() == before
    assert job_status(conn, ids[1]) == ("pending", "host:2:b", 2)
    assert [job_status(conn, i)[0] for i in (ids[0], ids[2])] == ["sent", "sent"]
    assert events(conn, ids[1])[-1] == ("lease_lost", "host:1:a", 1)
    assert [e[0] for e in events(conn, ids[0])] == ["claimed", "sent"]
    logged = Counter(r.getMessage() for r in caplog.records if r.name == "authsvc.worker.jobs")
    assert logged["sent"] == 2 and logged["lease_lost"] == 1



def test_a_lost_lease_whose_job_was_deleted_leaves_no_trail_and_spoils_no_batch(conn):
    """A stalled worker records after its job was taken over, sent and pruned.

    With the trail's foreign key that lease_lost row failed the whole
    statement, so every other outcome in the batch went unrecorded (and
    would be sent again). The trail has no key now (the baseline migration): the
    row is skipped, the rest are recorded, and no row outlives its job.
    """
    ids = queue_notices(conn, 2)
    stalled = jobs.claim_batch(conn, "host:1:a", 2, lease_seconds=30)
    conn.execute("DELETE FROM email_jobs WHERE id = %s", (ids[0],))  # as prune would, later
    outcomes = [Outcome(job, "sent", provider_message_id=f"<m{job.id}@x>") for job in stalled]
    assert jobs.record_outcomes(conn, outcomes) == [False, True]
    assert job_status(conn, ids[1])[0] == "sent"
    assert events(conn, ids[0]) == []  # its claim row went with the job, no lease_lost came
    orphans = conn.execute("SELECT count(*) FROM email_job_events AS e WHERE NOT EXISTS"
                           " (SELECT 1 FROM email_jobs AS j WHERE j.id = e.job_id)").fetchone()
    assert orphans == (0,)



def test_a_lost_lease_recorded_while_its_job_is_being_pruned_leaves_no_trail(
        conn, direct_database_url):
    """The prune's DELETE is still open when the stalled worker records its outcome.

    The record must wait for it and then find no job; reading the job from
    its snapshot instead would write a lease_lost row that the prune's trail
    delete never saw, a row outliving its job.
    """
    [job_id] = queue_notices(conn, 1)
    [stalled] = jobs.claim_batch(conn, "host:1:a", 1, lease_seconds=30)
    outcome: list[list[bool]] = []
    with psycopg.connect(direct_database_url, autocommit=True) as pruner, \
            psycopg.connect(direct_database_url, autocommit=True) as recorder:
        recorder_pid = recorder.info.backend_pid
        with pruner.transaction():
            pruner.execute("DELETE FROM email_jobs WHERE id = %s", (job_id,))
            recording = threading.Thread(target=lambda: outcome.append(
                jobs.record_outcomes(recorder, [Outcome(stalled, "sent")])))
            recording.start()
            wait_until_waiting_on_a_lock(conn, recorder_pid, "the record to wait for the prune")
        recording.join(10)
        assert not recording.is_alive()
    assert outcome == [[False]]
    assert conn.execute("SELECT count(*) FROM email_job_events").fetchone() == (0,)


def test_every_outcome_kind_in_one_batch(conn):
    """Final, retry, ambiguous and released rows each end up as their own statement did."""
    ids = queue_notices(conn, 4)
    claimed = jobs.claim_batch(conn, "host:1:a", 4, lease_seconds=30)
    outcomes = [
        Outcome(claimed[0], "failed", error="554 refused"),
        Outcome(claimed[1], "retry", error="451 later", delay_seconds=60),
        Outcome(claimed[2], "ambiguous", error="lost after dot", delay_seconds=60),
        Outcome(claimed[3], "released", error="shutdown"),
    ]
    assert jobs.record_outcomes(conn, outcomes) == [True] * 4
    rows = conn.execute(
        "SELECT status, attempt_count, lease_owner, last_error,"
        " next_attempt_at > now() + interval '50 seconds' FROM email_jobs ORDER BY id"
    ).fetchall()
    assert rows == [
        ("failed", 1, None, "554 refused", False),
        ("pending", 1, None, "451 later", True),
        ("pending", 1, None, "lost after dot", True),
        ("pending", 0, None, None, False),
    ]
    assert [events(conn, i)[-1][0] for i in ids] == ["failed", "retry", "ambiguous", "released"]


def test_an_idle_completer_records_a_lone_outcome_at_once(conn, unchecked_pool):
    """No timer and no batch to fill: one outcome is written by itself."""
    [job_id] = queue_notices(conn, 1)
    [job] = jobs.claim_batch(conn, "host:1:a", 1, lease_seconds=30)
    completer = Completer(unchecked_pool, max_unrecorded=32)
    completer.start()
    try:
        completer.submit(Outcome(job, "sent", provider_message_id="<m@x>"), FAR)
        # The completer counts the batch once its statement returned, just after the commit.
        wait_until(lambda: job_status(conn, job_id)[0] == "sent" and completer.batches >= 1, 5,
                   "the lone outcome recorded")
        assert completer.batches == 1 and completer.largest_batch == 1
    finally:
        assert completer.close(10)


def test_outcomes_arriving_during_a_write_share_the_next_statement_and_are_capped(
    conn, database_url, unchecked_pool
):
    """Group commit: while one write waits, the next outcomes pile up into one batch,
    and no more than max_unrecorded are ever outstanding (the at-least-once bound)."""
    ids = queue_notices(conn, 6)
    claimed = jobs.claim_batch(conn, "host:1:a", 6, lease_seconds=60)
    completer = Completer(unchecked_pool, max_unrecorded=4)
    completer.start()
    with psycopg.connect(database_url) as blocker:
        # Hold job 1's row so the first write waits on it.
        blocker.execute("SELECT 1 FROM email_jobs WHERE id = %s FOR UPDATE", (ids[0],))
        completer.submit(Outcome(claimed[0], "sent"), FAR)
        wait_until(lambda: completer.unrecorded == 1 and _lock_waiters(conn) == 1, 5,
                   "the first write to block")
        for job in claimed[1:4]:
            completer.submit(Outcome(job, "sent"), FAR)
        assert completer.unrecorded == 4
        fifth_in = threading.Event()

        def fifth() -> None:
            completer.submit(Outcome(claimed[4], "sent"), FAR)
            fifth_in.set()

        thread = threading.Thread(target=fifth, daemon=True)
        thread.start()
        thread.join(0.3)
        assert not fifth_in.is_set(), "the cap let a fifth unrecorded outcome in"
        blocker.rollback()
    thread.join(10)
    assert fifth_in.is_set()
    completer.submit(Outcome(claimed[5], "sent"), FAR)
    assert completer.close(10)
    assert [job_status(conn, i)[0] for i in ids] == ["sent"] * 6
    # 1 alone, then 2-4 together, then what was left (5 and 6, together or not); or
    # 2-5 together: the fifth joins the second statement when it takes the lock the
    # moment the first batch is recorded, before the completer forms the next one.
    assert completer.largest_batch in (3, 4) and completer.batches in (3, 4)


def _other_sessions(conn: psycopg.Connection, condition: str) -> int:
    """Sessions of this database other than `conn`'s for which `condition` holds."""
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND {}").format(sql.SQL(condition))
    ).fetchone()
    return row[0] if row else 0


def _busy_sessions(conn: psycopg.Connection) -> int:
    # Running a statement: a pooler keeps idle sessions open.
    return _other_sessions(conn, "state IS DISTINCT FROM 'idle'")


def _lock_waiters(conn: psycopg.Connection) -> int:
    return _other_sessions(conn, "wait_event_type = 'Lock'")


def test_a_broken_connection_is_retried_without_a_checkout_check(conn, unchecked_pool):
    """Check on error: a connection killed under the pool costs one retry, not the outcome."""
    [job_id] = queue_notices(conn, 1)
    [job] = jobs.claim_batch(conn, "host:1:a", 1, lease_seconds=30)
    with unchecked_pool.connection() as c:
        pid = c.info.backend_pid
    conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    completer = Completer(unchecked_pool, max_unrecorded=4)
    completer.start()
    try:
        completer.submit(Outcome(job, "sent"), FAR)
        wait_until(lambda: job_status(conn, job_id)[0] == "sent", 10, "the outcome recorded")
    finally:
        assert completer.close(10)


@pytest.mark.e2e
def test_sigkill_with_outcomes_unrecorded_resends_at_most_concurrency_plus_batch(
    conn, database_url, env, tmp_path
):
    """The documented bound: a kill re-sends only in-flight and unrecorded jobs."""
    concurrency, batch = 3, 5
    queue_notices(conn, 60)
    with SmtpDouble() as smtp:
        env = {**env, "AUTHSVC_SMTP_URL": smtp.url}
        # A lease long enough that no send times out on a loaded machine (its
        # timeout is a quarter of the lease): a timeout's retry would wait out
        # its backoff past the second, draining run. The leases are ended below.
        args = ["--concurrency", str(concurrency), "--batch", str(batch),
                "--lease-seconds", "30", "--poll-seconds", "0.2"]
        first = start_worker_process(env, tmp_path / "first.log", *args)
        try:
            smtp.wait_for(1, timeout=20)
            with psycopg.connect(database_url) as blocker:
                # Writes to the trail now wait: the completer fills up, then the
                # senders block on it, every one of them holding an accepted send.
                blocker.execute("LOCK TABLE email_job_events IN EXCLUSIVE MODE")
                wait_until(lambda: _lock_waiters(conn) >= 1, 10, "the worker to block")
                first.send_signal(signal.SIGKILL)
                first.wait(10)
        finally:
            if first.poll() is None:
                first.kill()
        sent_by_first = len(smtp.messages)
        # A claim the lock held up still commits once the lock is gone, with
        # the dead worker as its owner: let its sessions end before the leases do.
        wait_until(lambda: _busy_sessions(conn) == 0, 20, "the killed worker's statements to end")
        expire_leases(conn)  # the killed worker's leases ran out
        second = start_worker_process(env, tmp_path / "second.log", "--once", *args[:-2])
        assert second.wait(60) == 0
    copies = Counter(m.message_id for m in smtp.messages)
    duplicates = sum(1 for n in copies.values() if n > 1)
    assert len(copies) == 60 and max(copies.values()) <= 2
    assert duplicates <= concurrency + batch, (duplicates, sent_by_first)
    assert conn.execute(
        "SELECT count(*) FROM email_jobs WHERE status <> 'sent'"
    ).fetchone() == (0,)


def test_through_an_outage_an_outcome_is_given_up_when_its_local_lease_deadline_passes(
    conn, caplog
):
    """One lease clock: the deadline the worker took at claim time (time.monotonic()),
    not this host's wall clock against the database's lease_expires_at."""
    [job_id] = queue_notices(conn, 1)
    [job] = jobs.claim_batch(conn, "host:1:a", 1, lease_seconds=3600)
    # A pool whose server is gone: every write fails as in an outage.
    unreachable = ConnectionPool("host=127.0.0.1 port=1 connect_timeout=1", min_size=0,
                                 max_size=1, open=True, check=None)
    completer = Completer(unreachable, max_unrecorded=4)
    caplog.set_level(logging.ERROR, logger="authsvc.worker.completer")
    completer.start()
    try:
        completer.submit(Outcome(job, "sent", provider_message_id="<m@x>"),
                         time.monotonic() + 0.5)
        wait_until(lambda: completer.unrecorded == 0, 20, "the outcome to be given up")
    finally:
        assert completer.close(10)
        unreachable.close()
    [said] = [r for r in caplog.records if r.getMessage() == "outcome_unrecorded"]
    assert said.job_id == job_id
    # The database's lease still runs: the job is claimed, not recorded as sent.
    assert job_status(conn, job_id) == ("pending", "host:1:a", 1)
