"""The outbox counters (migrations/0011): exact through every writer, never backwards.

`authsvc outbox stats` and /metrics read final-state counts, event totals and
the send-latency histogram from a rollup the triggers keep, so these tests
hold it against a count of every row after worker outcomes, a redrive, an
operator's UPDATE and a prune, and race two folds against each other.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import psycopg
import pytest

from authsvc.metrics import LATENCY_BOUNDS
from authsvc.migrate import upgrade
from authsvc.outbox import STATUSES
from authsvc.outbox.admin import (
    OutboxStats,
    event_totals,
    live_outbox_stats,
    outbox_stats,
    prune_jobs,
    redrive_job,
    send_latency,
)
from tests.race_support import wait_until_waiting_on_a_lock
from tests.worker_support import queue_notices
from worker.jobs import Outcome, claim_batch, record_outcomes


def _without_age(stats: OutboxStats) -> OutboxStats:
    # Each query has its own now(): the oldest pending age is compared apart.
    return replace(stats, oldest_pending_seconds=0.0)


def assert_exact(conn: psycopg.Connection) -> OutboxStats:
    """The rollup's stats equal a count of every row; returns them."""
    stats = outbox_stats(conn)
    assert _without_age(stats) == _without_age(live_outbox_stats(conn))
    return stats


def _gauges(body: str) -> dict[str, int]:
    return {m[0]: int(float(m[1])) for m in re.findall(
        r'^authsvc_outbox_jobs\{status="(\w+)"\} (\S+)$', body, re.MULTILINE)}


def test_counts_stay_exact_across_outcomes_redrive_an_update_and_prune(conn, client):
    queue_notices(conn, 8)
    claimed = claim_batch(conn, "counter-test", 8, 30)
    events = ["sent", "sent", "failed", "failed", "retry", "superseded", "expired", "suppressed"]
    recorded = record_outcomes(conn, [Outcome(job, event) for job, event in
                                      zip(claimed, events, strict=True)])
    assert all(recorded)
    stats = assert_exact(conn)
    assert (stats.sent, stats.failed, stats.pending) == (2, 2, 1)

    failed = [j.id for j, e in zip(claimed, events, strict=True) if e == "failed"]
    assert redrive_job(conn, failed[0])
    stats = assert_exact(conn)
    assert (stats.failed, stats.pending) == (1, 2)

    # An operator's hand edit is counted too: the triggers see every writer.
    conn.execute("UPDATE email_jobs SET status = 'expired' WHERE id = %s", (failed[0],))
    conn.execute("INSERT INTO email_jobs (template, recipient, status)"
                 " VALUES ('password_changed', 'x@example.com', 'sent')")
    stats = assert_exact(conn)
    assert (stats.sent, stats.expired) == (3, 2)

    # Prune: the gauges count retained rows (they drop); the counters are totals
    # since install (they do not). Before 0011 the event totals fell with the trails.
    sends_before = event_totals(conn)["sent"]
    latency_before = send_latency(conn, LATENCY_BOUNDS)
    conn.execute("UPDATE email_jobs SET created_at = now() - interval '40 days'"
                 " WHERE status <> 'pending'")
    assert prune_jobs(conn, 30 * 86400, batch=3) == 8  # every final job, in batches of 3
    stats = assert_exact(conn)
    assert (stats.sent, stats.failed, stats.expired) == (0, 0, 0)
    assert stats.pending == 1
    assert event_totals(conn)["sent"] == sends_before == 2
    assert send_latency(conn, LATENCY_BOUNDS) == latency_before
    assert latency_before.sent == 3  # the two the worker sent and the hand-inserted one

    # /metrics reports the same gauges as `outbox stats`.
    body = client.get("/metrics").get_data(as_text=True)
    assert _gauges(body) == {s: getattr(stats, s) for s in STATUSES}
    assert "authsvc_email_sends_total 2" in body.splitlines()


def test_a_claim_leaves_the_job_counters_alone(conn):
    queue_notices(conn, 4)
    outbox_stats(conn)  # fold what the inserts left
    claim_batch(conn, "counter-test", 4, 30)
    names = [r[0] for r in conn.execute("SELECT name FROM outbox_counter_deltas")]
    assert names == ["events_claimed"]  # one delta row for the statement, no job counts


def test_a_retaken_lease_counts_as_an_expiry_once(conn):
    [job_id] = queue_notices(conn, 1)
    claim_batch(conn, "first", 1, 30)
    conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second' WHERE id = %s", (job_id,))
    [second] = claim_batch(conn, "second", 1, 30)
    assert record_outcomes(conn, [Outcome(second, "sent")]) == [True]
    totals = event_totals(conn)
    assert (totals["claimed"], totals["lease_expired"], totals["sent"]) == (2, 1, 1)


def test_two_scrapes_folding_at_once_never_read_a_total_that_went_back(direct_database_url, conn):
    queue_notices(conn, 3)
    claimed = claim_batch(conn, "counter-test", 3, 30)
    record_outcomes(conn, [Outcome(job, "sent") for job in claimed])
    seen: list[OutboxStats] = []
    # On the server itself: through a pooler the backend pid changes per transaction.
    with psycopg.connect(direct_database_url, autocommit=True) as first, \
            psycopg.connect(direct_database_url, autocommit=True) as second:
        second_pid = second.info.backend_pid
        with first.transaction():
            outbox_stats(first)  # folds the sends, still uncommitted, holding the fold lock
            scrape = threading.Thread(target=lambda: seen.append(outbox_stats(second)))
            scrape.start()
            wait_until_waiting_on_a_lock(conn, second_pid, "the second fold to wait")
        scrape.join(10)
        assert not scrape.is_alive()
    assert seen[0].sent == 3


def test_a_latency_bound_the_counters_do_not_keep_is_refused(conn):
    with pytest.raises(ValueError, match=r"\[0\.7\]"):
        send_latency(conn, [0.5, 0.7])
    assert [b for b, _ in send_latency(conn, LATENCY_BOUNDS).buckets] == list(LATENCY_BOUNDS)


def test_a_reclaim_after_an_outcome_or_a_release_is_no_expiry(conn):
    sent_id, released_id = queue_notices(conn, 2)
    first = claim_batch(conn, "first", 2, 30)
    outcomes = {sent_id: "retry", released_id: "released"}
    assert all(record_outcomes(conn, [Outcome(job, outcomes[job.id]) for job in first]))
    conn.execute("UPDATE email_jobs SET next_attempt_at = now() WHERE id = %s", (sent_id,))
    second = claim_batch(conn, "second", 2, 30)
    assert sorted(job.id for job in second) == [sent_id, released_id]
    assert event_totals(conn).get("lease_expired", 0) == 0


def test_an_expiry_after_a_late_lease_lost_still_counts(conn):
    """A's lease expires, B takes over, A's late outcome is lost, B expires, C takes over."""
    [job_id] = queue_notices(conn, 1)

    def expire() -> None:
        conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                     " next_attempt_at = now() - interval '1 second' WHERE id = %s", (job_id,))

    [a] = claim_batch(conn, "a", 1, 30)
    expire()
    claim_batch(conn, "b", 1, 30)
    assert record_outcomes(conn, [Outcome(a, "sent")]) == [False]  # a lease_lost row
    expire()
    [c] = claim_batch(conn, "c", 1, 30)
    assert record_outcomes(conn, [Outcome(c, "sent")]) == [True]
    assert event_totals(conn)["lease_expired"] == 2



def test_a_statement_over_sent_and_newly_sent_rows_counts_only_the_new_sends(conn):
    """The histogram reads the new rows alone unless a statement also found sent rows (0017)."""
    ids = queue_notices(conn, 3)
    conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = created_at + interval '1 s'"
                 " WHERE id = %s", (ids[0],))
    # One operator statement: a job already sent (counted at 1 s) and two becoming sent.
    conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = created_at + interval '3 s',"
                 " provider_message_id = 'by-hand' WHERE id = ANY(%s)", (ids,))
    assert assert_exact(conn).sent == 3
    latency = send_latency(conn, LATENCY_BOUNDS)
    assert (latency.sent, latency.total_seconds) == (3, 7.0)
    assert event_totals(conn).get("lease_expired", 0) == 0


def test_a_retry_or_a_release_leaves_the_job_counters_alone(conn):
    queue_notices(conn, 2)
    claimed = claim_batch(conn, "counter-test", 2, 30)
    outbox_stats(conn)  # fold what the inserts and the claim left
    assert all(record_outcomes(conn, [Outcome(claimed[0], "retry", delay_seconds=60),
                                      Outcome(claimed[1], "released")]))
    names = sorted(r[0] for r in conn.execute("SELECT name FROM outbox_counter_deltas"))
    assert names == ["events_released", "events_retry"]  # no jobs_* row, no histogram
    assert assert_exact(conn).pending == 2


def test_one_statement_that_swaps_final_statuses_keeps_the_counts_exact(conn):
    ids = queue_notices(conn, 4)
    conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = now() WHERE id = ANY(%s)",
                 (ids[:2],))
    conn.execute("UPDATE email_jobs SET status = 'failed' WHERE id = ANY(%s)", (ids[2:],))
    # sent -> failed, failed -> sent, and an untouched status, all in one statement.
    conn.execute("UPDATE email_jobs SET status = CASE WHEN id = %(a)s THEN 'failed'"
                 " WHEN id = %(b)s THEN 'sent' ELSE status END, sent_at = coalesce(sent_at, now())"
                 " WHERE id = ANY(%(all)s)", {"a": ids[0], "b": ids[2], "all": ids})
    stats = assert_exact(conn)
    assert (stats.sent, stats.failed) == (2, 2)
    assert send_latency(conn, LATENCY_BOUNDS).sent == 3  # ids[2] became sent; ids[0] was


def test_an_insert_of_pending_and_final_jobs_counts_the_final_ones(conn):
    conn.execute("INSERT INTO email_jobs (template, recipient, status, sent_at) VALUES"
                 " ('password_changed', 'a@example.com', 'pending', NULL),"
                 " ('password_changed', 'b@example.com', 'sent', now()),"
                 " ('password_changed', 'c@example.com', 'failed', NULL)")
    stats = assert_exact(conn)
    assert (stats.pending, stats.sent, stats.failed) == (1, 1, 1)
    assert send_latency(conn, LATENCY_BOUNDS).sent == 1


def test_a_claim_of_one_expired_lease_and_one_fresh_job_counts_one_expiry(conn):
    expired_id, _fresh_id = queue_notices(conn, 2)
    claim_batch(conn, "first", 1, 30)  # the oldest: expired_id
    conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second' WHERE id = %s", (expired_id,))
    assert len(claim_batch(conn, "second", 2, 30)) == 2
    assert event_totals(conn)["lease_expired"] == 1


def test_a_hand_made_attempt_raise_on_a_leased_job_counts_as_an_expiry(conn):
    """0012's rule is the attempt rising on an owned row, whatever the statement sets."""
    [job_id] = queue_notices(conn, 1)
    claim_batch(conn, "first", 1, 30)
    conn.execute("UPDATE email_jobs SET attempt_count = attempt_count + 1, lease_owner = NULL,"
                 " lease_expires_at = NULL WHERE id = %s", (job_id,))
    assert event_totals(conn)["lease_expired"] == 1


def _histogram_calls(conn: psycopg.Connection) -> int:
    """Executions of outbox_latency_deltas as a function (not inlined) in this transaction."""
    row = conn.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions"
                       " WHERE funcname = 'outbox_latency_deltas'").fetchone()
    assert row is not None
    return int(row[0])


def test_queueing_and_recording_do_not_run_the_histogram_function_per_statement(conn):
    """0011 planned the histogram's SQL function afresh for every job INSERT and outcome.

    That was ~0.5 ms of server time per password-reset request, for a pending
    job that counts nothing (migrations/0013). Within one transaction (so the
    figures hold through a pooler), a queued job must not call the function
    at all, and a statement that sends jobs must run it inlined, not as a call.
    """
    with conn.transaction():
        conn.execute("SET LOCAL track_functions = 'all'")
        queue_notices(conn, 2)
        assert _histogram_calls(conn) == 0  # was 1: the INSERT's empty histogram
        claimed = claim_batch(conn, "counter-test", 2, 30)
        assert record_outcomes(conn, [Outcome(job, "sent") for job in claimed]) == [True, True]
        assert _histogram_calls(conn) == 0  # was 1 more: the outcome's histogram
    assert send_latency(conn, LATENCY_BOUNDS).sent == 2  # and the histogram still counts



_UNDO_0011 = (
    "DROP TRIGGER outbox_count_lease_takeovers ON email_jobs",
    "DROP FUNCTION outbox_count_lease_takeovers",
    "DROP TRIGGER outbox_count_inserted_jobs ON email_jobs",
    "DROP TRIGGER outbox_count_updated_jobs ON email_jobs",
    "DROP TRIGGER outbox_count_deleted_jobs ON email_jobs",
    "DROP TRIGGER outbox_count_inserted_events ON email_job_events",
    "DROP FUNCTION outbox_count_job_changes, outbox_count_events, outbox_latency_deltas,"
    " outbox_latency_bounds",
    "DROP TABLE outbox_counters, outbox_counter_deltas",
    "DELETE FROM schema_migrations WHERE version IN ('0011', '0012', '0013', '0017')",
)


def test_the_migration_seeds_the_counters_from_an_outbox_that_already_has_history(
        database_url, conn):
    for statement in _UNDO_0011:
        conn.execute(statement)  # type: ignore[arg-type]  # the test's own SQL
    ids = queue_notices(conn, 3)
    conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = created_at + interval '3 s'"
                 " WHERE id = ANY(%s)", (ids[:2],))
    conn.execute("UPDATE email_jobs SET status = 'failed' WHERE id = %s", (ids[2],))
    conn.execute("INSERT INTO email_job_events (job_id, event, attempt) VALUES"
                 " (%(a)s, 'claimed', 1), (%(a)s, 'claimed', 2), (%(a)s, 'sent', 2)",
                 {"a": ids[0]})

    assert [m.version for m in upgrade(database_url)] == ["0011", "0012", "0013", "0017"]

    assert_exact(conn)
    assert event_totals(conn) == {"claimed": 2, "sent": 1, "lease_expired": 1}
    latency = send_latency(conn, LATENCY_BOUNDS)
    assert (latency.sent, latency.total_seconds) == (2, 6.0)
    assert dict(latency.buckets)[2.5] == 0 and dict(latency.buckets)[5.0] == 2
