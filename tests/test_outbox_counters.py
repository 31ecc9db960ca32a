"""The outbox counters (the baseline migration): exact through every writer, never backwards.

`authsvc outbox stats` and /metrics read final-state counts, event totals and
the send-latency histogram from counters that the claim, the outcomes, the
redrive and the prune write in the statements that change the outbox, so
these tests hold them against a count of every row after each of those,
read them while a fold is under way, and check the deltas stay few.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import psycopg
import pytest
from click.testing import CliRunner

from authsvc.cli import main
from authsvc.observability.metrics import LATENCY_BOUNDS
from authsvc.outbox import STATUSES
from authsvc.outbox.admin import (
    OutboxStats,
    event_totals,
    fold_counters,
    live_outbox_stats,
    outbox_stats,
    prune_jobs,
    recount_jobs,
    redrive_job,
    send_latency,
)
from authsvc.worker.jobs import Outcome, claim_batch, record_outcomes
from tests.race_support import wait_until_waiting_on_a_lock
from tests.worker_support import queue_notices


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


def _deltas(conn: psycopg.Connection) -> list[str]:
    """The counter deltas waiting to be folded, by name."""
    return sorted(str(r[0]) for r in conn.execute("SELECT name FROM outbox_counter_deltas"))


def _sample(body: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", body, re.MULTILINE)
    assert match, f"{series} missing"
    return float(match.group(1))


def test_counts_stay_exact_across_outcomes_a_redrive_and_a_prune(conn, client):
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

    # The redriven job expires on its next try, a job queued since is sent,
    # and the earlier retry is put off again.
    [late] = queue_notices(conn, 1, prefix="late")
    again = {job.id: job for job in claim_batch(conn, "counter-test", 10, 30)}
    retried = next(j.id for j, e in zip(claimed, events, strict=True) if e == "retry")
    assert set(again) == {failed[0], late, retried}
    assert all(record_outcomes(conn, [Outcome(again[failed[0]], "expired"),
                                      Outcome(again[late], "sent"),
                                      Outcome(again[retried], "retry", delay_seconds=600)]))
    stats = assert_exact(conn)
    assert (stats.sent, stats.expired) == (3, 2)

    # Prune: the gauges count retained rows (they drop); the counters are totals
    # since install (they do not), though the trails they counted are gone.
    sends_before = event_totals(conn)["sent"]
    latency_before = send_latency(conn, LATENCY_BOUNDS)
    conn.execute("UPDATE email_jobs SET created_at = now() - interval '40 days'"
                 " WHERE status <> 'pending'")
    assert prune_jobs(conn, 30 * 86400, batch=3) == 8  # every final job, in batches of 3
    stats = assert_exact(conn)
    assert (stats.sent, stats.failed, stats.expired) == (0, 0, 0)
    assert stats.pending == 1
    assert event_totals(conn)["sent"] == sends_before == 3
    assert send_latency(conn, LATENCY_BOUNDS) == latency_before
    assert latency_before.sent == 3

    # /metrics reports the same gauges as `outbox stats`.
    body = client.get("/metrics").get_data(as_text=True)
    assert _gauges(body) == {s: getattr(stats, s) for s in STATUSES}
    assert _sample(body, "authsvc_email_sends_total") == 3


def test_a_claim_leaves_the_job_counters_alone(conn):
    queue_notices(conn, 4)
    assert _deltas(conn) == []  # queueing counts nothing: pending jobs are counted live
    claim_batch(conn, "counter-test", 4, 30)
    assert _deltas(conn) == ["events_claimed"]  # one delta row for the statement, no job counts


def test_a_retaken_lease_counts_as_an_expiry_once(conn):
    [job_id] = queue_notices(conn, 1)
    claim_batch(conn, "first", 1, 30)
    conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second' WHERE id = %s", (job_id,))
    [second] = claim_batch(conn, "second", 1, 30)
    assert record_outcomes(conn, [Outcome(second, "sent")]) == [True]
    totals = event_totals(conn)
    assert (totals["claimed"], totals["lease_expired"], totals["sent"]) == (2, 1, 1)


def test_a_read_during_a_fold_sees_the_same_totals_and_a_second_fold_does_not_wait(
        direct_database_url, conn):
    queue_notices(conn, 3)
    claimed = claim_batch(conn, "counter-test", 3, 30)
    record_outcomes(conn, [Outcome(job, "sent") for job in claimed])
    # On the server itself: through a pooler the backend pid changes per transaction.
    with psycopg.connect(direct_database_url, autocommit=True) as first, \
            psycopg.connect(direct_database_url, autocommit=True) as second:
        with first.transaction():
            assert fold_counters(first)  # moved, not yet committed, under the fold lock
            assert outbox_stats(second).sent == 3  # the deltas, still there for others
            assert not fold_counters(second)  # one fold at a time; the other does not wait
            assert event_totals(second)["sent"] == 3
        assert outbox_stats(second).sent == 3  # the folded total
        assert event_totals(second)["sent"] == 3
    assert _deltas(conn) == []


def test_the_worker_folds_the_deltas_without_anyone_reading(database_url, settings, conn,
                                                            monkeypatch):
    """Bounded with no scraper: each worker round that claimed folds what was written."""
    from authsvc.worker import loop
    from testkit.smtp_double import SmtpDouble
    from tests.worker_support import worker

    monkeypatch.setattr(loop, "FOLD_EVERY_SECONDS", 0.0)
    queue_notices(conn, 6)
    with SmtpDouble() as smtp:
        worker(database_url, settings, smtp.url, once=True, batch=2).run()
    # Every claim of a job was followed by a fold in the same round.
    assert "events_claimed" not in _deltas(conn)
    assert assert_exact(conn).sent == 6
    assert event_totals(conn)["claimed"] == 6


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



def test_a_retry_or_a_release_leaves_the_job_counters_alone(conn):
    queue_notices(conn, 2)
    claimed = claim_batch(conn, "counter-test", 2, 30)
    assert fold_counters(conn)  # the claim's deltas
    assert all(record_outcomes(conn, [Outcome(claimed[0], "retry", delay_seconds=60),
                                      Outcome(claimed[1], "released")]))
    assert _deltas(conn) == ["events_released", "events_retry"]  # no jobs_* row, no histogram
    assert assert_exact(conn).pending == 2


def test_an_outcome_recorded_twice_counts_one_send(conn):
    """The second record finds the lease gone: a lease_lost event, not a second send."""
    queue_notices(conn, 1)
    [job] = claim_batch(conn, "counter-test", 1, 30)
    assert record_outcomes(conn, [Outcome(job, "sent")]) == [True]
    assert record_outcomes(conn, [Outcome(job, "sent")]) == [False]
    assert assert_exact(conn).sent == 1
    assert (event_totals(conn)["sent"], event_totals(conn)["lease_lost"]) == (1, 1)
    assert send_latency(conn, LATENCY_BOUNDS).sent == 1


def test_a_claim_of_one_expired_lease_and_one_fresh_job_counts_one_expiry(conn):
    expired_id, _fresh_id = queue_notices(conn, 2)
    claim_batch(conn, "first", 1, 30)  # the oldest: expired_id
    conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second' WHERE id = %s", (expired_id,))
    assert len(claim_batch(conn, "second", 2, 30)) == 2
    assert event_totals(conn)["lease_expired"] == 1


def _hand_made_sent_job(conn: psycopg.Connection) -> int:
    """A job made sent by an UPDATE no counter sees (an old worker, or a hand edit)."""
    [job_id] = queue_notices(conn, 1, prefix="by-hand")
    conn.execute("UPDATE email_jobs SET status = 'sent', created_at = now() - interval '40 days'"
                 " WHERE id = %s", (job_id,))
    return job_id


def test_a_recount_repairs_what_a_prune_of_an_uncounted_job_drove_below_zero(conn, client, env):
    _hand_made_sent_job(conn)
    assert prune_jobs(conn, 86400) == 1
    # Prune takes away what it deletes, counted or not: the drift a recount repairs.
    assert outbox_stats(conn).sent == -1 and live_outbox_stats(conn).sent == 0
    assert _gauges(client.get("/metrics").get_data(as_text=True))["sent"] == -1

    result = CliRunner().invoke(main, ["outbox", "recount"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["sent: counted -1, now 0"]
    stats = assert_exact(conn)
    assert _gauges(client.get("/metrics").get_data(as_text=True)) == {
        s: getattr(stats, s) for s in STATUSES}
    assert recount_jobs(conn) == []  # nothing left to correct


def test_a_recount_leaves_the_unfolded_deltas_to_the_fold(conn):
    queue_notices(conn, 3)
    claimed = claim_batch(conn, "counter-test", 3, 30)
    assert all(record_outcomes(conn, [Outcome(job, "sent") for job in claimed]))
    _hand_made_sent_job(conn)
    assert "jobs_sent" in _deltas(conn)  # not folded yet: the recount must not count them twice
    assert [(c.status, c.counted, c.live) for c in recount_jobs(conn)] == [("sent", 3, 4)]
    assert assert_exact(conn).sent == 4
    assert fold_counters(conn)
    assert assert_exact(conn).sent == 4


def test_a_recount_waits_for_a_fold_under_way(direct_database_url, conn):
    """Had it not waited, the fold's commit would add deltas the recount already took off."""
    queue_notices(conn, 2)
    claimed = claim_batch(conn, "counter-test", 2, 30)
    assert all(record_outcomes(conn, [Outcome(job, "sent") for job in claimed]))
    _hand_made_sent_job(conn)
    corrections: list[object] = []
    with psycopg.connect(direct_database_url, autocommit=True) as folder, \
            psycopg.connect(direct_database_url, autocommit=True) as recounter:
        with folder.transaction():
            assert fold_counters(folder)
            thread = threading.Thread(target=lambda: corrections.extend(recount_jobs(recounter)))
            thread.start()
            wait_until_waiting_on_a_lock(conn, recounter.info.backend_pid,
                                         "the recount to wait for the fold")
        thread.join(30)
    assert len(corrections) == 1
    assert assert_exact(conn).sent == 3


def test_outbox_recount_takes_no_arguments(env):
    result = CliRunner().invoke(main, ["outbox", "recount", "sent"], env=env)
    assert result.exit_code == 2, result.output
    assert "Got unexpected extra argument (sent)" in result.output


def test_one_scrape_counts_a_job_that_is_sent_meanwhile_once(direct_database_url, conn):
    """The pending side and the counters are read in one snapshot."""
    queue_notices(conn, 1)
    [job] = claim_batch(conn, "counter-test", 1, 30)
    seen: list[OutboxStats] = []
    with psycopg.connect(direct_database_url, autocommit=True) as recorder, \
            psycopg.connect(direct_database_url, autocommit=True) as reader:
        with recorder.transaction():
            # The deltas table held: the read counts the pending side, then waits.
            recorder.execute("LOCK TABLE outbox_counter_deltas IN ACCESS EXCLUSIVE MODE")
            assert record_outcomes(recorder, [Outcome(job, "sent")]) == [True]
            thread = threading.Thread(target=lambda: seen.append(outbox_stats(reader)))
            thread.start()
            wait_until_waiting_on_a_lock(conn, reader.info.backend_pid,
                                         "the read to wait for the outcome")
        thread.join(30)
    [stats] = seen
    assert (stats.pending, stats.sent) == (1, 0)  # as before the outcome, whole
    assert assert_exact(conn).sent == 1
