"""How the worker handles each failure class (issue 3, done-when 4), over real SMTP."""

from __future__ import annotations

import logging
import ssl
import threading

import pytest

from authsvc.worker import jobs
from authsvc.worker.delivery import RetryPolicy
from authsvc.worker.loop import MailerUnavailable, Worker, WorkerOptions
from authsvc.worker.mailers import SmtpMailer
from tests.worker_support import (
    deliver_now,
    delivery,
    events,
    job_status,
    make_due,
    message_id_of,
    queue_notices,
    renderer,
    smtp_factory,
)


def outcome(conn, job_id: int) -> tuple[str, str | None]:
    row = conn.execute("SELECT status, last_error FROM email_jobs WHERE id = %s", (job_id,))
    return tuple(row.fetchone())


def failed_with(conn, job_id: int) -> str:
    """The error a job that ended `failed` keeps."""
    status, error = outcome(conn, job_id)
    assert status == "failed" and error is not None, (status, error)
    return error


def _deliver_twice(conn, pool, deliverer, smtp_url: str, job_id: int) -> tuple[str, str]:
    """Deliver, make the job due at once (skipping its backoff), deliver again."""
    mailer = smtp_factory(smtp_url)(2.0)
    try:
        first = _claim_and_deliver(pool, deliverer, mailer)
        make_due(conn, job_id)
        return first, _claim_and_deliver(pool, deliverer, mailer)
    finally:
        mailer.close()


def _retry_delay(conn, job_id: int) -> float:
    """Seconds between the retry being recorded and the job becoming due again."""
    row = conn.execute(
        "SELECT extract(epoch FROM j.next_attempt_at - e.created_at)::float8 FROM email_jobs j"
        " JOIN email_job_events e ON e.job_id = j.id WHERE j.id = %s AND e.event = 'retry'"
        " ORDER BY e.id DESC LIMIT 1",
        (job_id,),
    ).fetchone()
    return float(row[0])


def _claim_and_deliver(pool, deliverer, mailer) -> str:
    with pool.connection() as c:
        [job] = jobs.claim_batch(c, "tester", 1, lease_seconds=30)
    return deliver_now(pool, deliverer, mailer, job)


def test_4xx_is_retried_with_growing_delay_then_sent(conn, pool, settings, smtp):
    """Done-when 4 (transient): backoff grows, the message arrives once it is accepted."""
    [job_id] = queue_notices(conn, 1)
    smtp.script("tempfail", "tempfail")
    deliverer = delivery(pool, settings, retry=RetryPolicy(max_attempts=5, base_seconds=10))
    mailer = smtp_factory(smtp.url)(2.0)

    assert _claim_and_deliver(pool, deliverer, mailer) == "retry"
    first = _retry_delay(conn, job_id)
    assert job_status(conn, job_id) == ("pending", None, 1)
    with pool.connection() as c:
        assert jobs.claim_batch(c, "tester", 1, 30) == [], "retried job must wait for its backoff"
    make_due(conn, job_id)
    assert _claim_and_deliver(pool, deliverer, mailer) == "retry"
    second = _retry_delay(conn, job_id)
    make_due(conn, job_id)
    assert _claim_and_deliver(pool, deliverer, mailer) == "sent"
    mailer.close()

    assert 10 <= first <= 15 and 20 <= second <= 30
    assert len(smtp.messages) == 1
    assert job_status(conn, job_id) == ("sent", None, 3)
    assert outcome(conn, job_id) == ("sent", None)


def test_5xx_fails_with_the_smtp_reply(conn, pool, settings, smtp):
    """Done-when 4 (permanent)."""
    [job_id] = queue_notices(conn, 1)
    smtp.mode = "reject"
    mailer = smtp_factory(smtp.url)(2.0)
    assert _claim_and_deliver(pool, delivery(pool, settings), mailer) == "failed"
    mailer.close()
    assert "550 5.1.1 no such user here" in failed_with(conn, job_id)
    assert [e[0] for e in events(conn, job_id)] == ["claimed", "failed"]


def test_max_attempts_fails_the_job(conn, pool, settings, smtp):
    """Done-when 4 (exhausted)."""
    [job_id] = queue_notices(conn, 1)
    smtp.mode = "tempfail"
    deliverer = delivery(pool, settings, retry=RetryPolicy(max_attempts=2, base_seconds=1))
    assert _deliver_twice(conn, pool, deliverer, smtp.url, job_id) == ("retry", "failed")
    error = failed_with(conn, job_id)
    assert error.startswith("attempts exhausted (2)") and "451" in error


@pytest.mark.parametrize("mode", ["drop_before_data", "stall_before_data"])
def test_connection_lost_or_timeout_before_data_is_retried(conn, pool, settings, smtp, mode):
    [job_id] = queue_notices(conn, 1)
    smtp.mode = mode
    mailer = smtp_factory(smtp.url)(0.5)
    assert _claim_and_deliver(pool, delivery(pool, settings), mailer) == "retry"
    mailer.close()
    assert smtp.messages == [] and job_status(conn, job_id) == ("pending", None, 1)


def test_disconnect_after_final_dot_is_retried_once_with_the_same_message_id(
    conn, pool, settings, smtp
):
    [job_id] = queue_notices(conn, 1)
    smtp.script("accept_then_drop")
    deliverer = delivery(pool, settings)
    assert _deliver_twice(conn, pool, deliverer, smtp.url, job_id) == ("ambiguous", "sent")
    assert [m.message_id for m in smtp.messages] == [message_id_of(conn, job_id)] * 2
    assert [e[0] for e in events(conn, job_id)] == ["claimed", "ambiguous", "claimed", "sent"]


def test_second_ambiguous_send_fails_instead_of_repeating(conn, pool, settings, smtp):
    [job_id] = queue_notices(conn, 1)
    smtp.mode = "accept_then_drop"
    deliverer = delivery(pool, settings)
    assert _deliver_twice(conn, pool, deliverer, smtp.url, job_id) == ("ambiguous", "failed")
    assert "may have been delivered" in failed_with(conn, job_id)


def test_connection_reused_across_jobs_and_reopened_when_the_server_dropped_it(
    conn, pool, settings, smtp
):
    queue_notices(conn, 3)
    deliverer = delivery(pool, settings)
    mailer = smtp_factory(smtp.url)(2.0)
    assert _claim_and_deliver(pool, deliverer, mailer) == "sent"
    assert _claim_and_deliver(pool, deliverer, mailer) == "sent"
    smtp.drop_connections()  # an idle timeout on the server side
    assert _claim_and_deliver(pool, deliverer, mailer) == "sent", "stale connection cost a retry"
    mailer.close()
    peers = {m.peer for m in smtp.messages}
    assert len(smtp.messages) == 3 and len(peers) == 2, "first two should share one connection"


def test_a_sender_that_cannot_build_its_mailer_ends_the_worker_saying_why(
    database_url, conn, settings, caplog
):
    """Not a live process that sends nothing: the worker stops, and says why."""
    [job_id] = queue_notices(conn, 1)

    def no_trust_store(_timeout: float) -> SmtpMailer:
        raise ssl.SSLError("no CA certificates could be loaded")

    w = Worker(database_url, renderer(settings), no_trust_store,
               WorkerOptions(concurrency=2, batch=5, poll_seconds=0.2))
    raised: list[BaseException] = []

    def run() -> None:
        try:
            w.run()
        except MailerUnavailable as exc:
            raised.append(exc)

    done = threading.Thread(target=run, daemon=True)
    with caplog.at_level(logging.ERROR, logger="authsvc.worker.loop"):
        done.start()
        done.join(20)
        stopped = not done.is_alive()
        w.request_stop()  # the old behaviour: running on, sending nothing
    assert stopped, "the worker kept running without a mailer"
    assert raised and raised[0] is w.failure
    assert "no CA certificates" in str(w.failure)
    assert any(r.getMessage() == "mailer_unavailable" for r in caplog.records)
    # Nothing was sent or lost: the job is pending, and due again when its lease ends.
    assert job_status(conn, job_id)[0] == "pending"
