"""The outbox worker (issue 3) against real PostgreSQL and a real SMTP server."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit
from uuid import uuid4

import psycopg
import pytest

from authsvc import ratelimit
from authsvc.accounts import actions, users
from authsvc.accounts.code_tries import address_digest
from authsvc.apps.keys import register_app
from authsvc.outbox import count_and_queue_link
from authsvc.worker import jobs, loop
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.worker_support import (
    deliver_now,
    delivery,
    events,
    expire_lease,
    job_status,
    message_id_of,
    public_id_of,
    queue_notices,
    running,
    smtp_factory,
    worker,
)


def link_token(text: str) -> str:
    link = next(word for word in text.split() if "token=" in word)
    return parse_qs(urlsplit(link).query)["token"][0]


def test_racing_workers_send_each_job_exactly_once(database_url, conn, settings, smtp):
    """Done-when 1: 8 workers over 500 jobs; one claim, one send, one message per job."""
    job_ids = queue_notices(conn, 500)
    workers = [
        worker(database_url, settings, smtp.url, concurrency=2, batch=10, once=True)
        for _ in range(8)
    ]
    threads = [threading.Thread(target=w.run) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)

    received = Counter(m.message_id for m in smtp.messages)
    assert len(received) == 500 and set(received.values()) == {1}
    assert {message_id_of(conn, i) for i in job_ids} == set(received)
    statuses = conn.execute("SELECT status, count(*) FROM email_jobs GROUP BY status").fetchall()
    assert statuses == [("sent", 500)]
    claims = conn.execute(
        "SELECT job_id, count(*), count(DISTINCT lease_owner) FROM email_job_events"
        " WHERE event = 'claimed' GROUP BY job_id"
    ).fetchall()
    assert len(claims) == 500 and all(n == 1 for _, n, _owners in claims)
    owners = conn.execute(
        "SELECT count(DISTINCT lease_owner) FROM email_job_events WHERE event = 'sent'"
    ).fetchone()
    assert owners is not None and owners[0] > 1, "the workers did not actually race"


def test_expired_lease_is_reclaimed_and_late_finisher_logs_lease_lost(
    conn, pool, settings, smtp, caplog
):
    """Done-when 2."""
    [job_id] = queue_notices(conn, 1)
    with pool.connection() as c:
        [first] = jobs.claim_batch(c, "worker-a", 1, lease_seconds=30)
        assert jobs.claim_batch(c, "worker-b", 1, lease_seconds=30) == [], "lease still live"
        expire_lease(conn, job_id)
        [second] = jobs.claim_batch(c, "worker-b", 1, lease_seconds=30)
    assert (first.attempt_count, second.attempt_count) == (1, 2)

    caplog.set_level(logging.INFO, logger="authsvc.worker")
    mailer = smtp_factory(smtp.url)(2.0)
    outcome = deliver_now(pool, delivery(pool, settings), mailer, first)
    mailer.close()

    assert outcome == "lease_lost"
    assert job_status(conn, job_id) == ("pending", "worker-b", 2), "late finisher overwrote the job"
    assert events(conn, job_id) == [
        ("claimed", "worker-a", 1),
        ("claimed", "worker-b", 2),
        ("lease_lost", "worker-a", 1),
    ]
    lost = [r for r in caplog.records if r.getMessage() == "lease_lost"]
    assert lost and lost[0].job_id == job_id and lost[0].lease_owner == "worker-a"


def _record(conn, outcome: jobs.Outcome) -> bool:
    """As the completer records: one statement for the batch, here of one."""
    return jobs.record_outcomes(conn, [outcome])[0]


def _record_stale(conn, job: jobs.ClaimedJob, stale: str) -> bool:
    if stale == "retry":
        return _record(conn, jobs.Outcome(job, "retry", error="RCPT: TimeoutError: timed out"))
    if stale == "failed":
        return _record(conn, jobs.Outcome(job, "failed", error="554 5.6.0 message refused"))
    return _record(conn, jobs.Outcome(job, "released", error="lease too close to expiry"))


@pytest.mark.parametrize("stale", ["retry", "failed", "release"])
def test_stale_claim_cannot_record_over_a_reclaim_by_the_same_process(conn, stale, caplog):
    """The lease owner is one string per process: the claim (its attempt) must be checked too.

    A send outlives its lease and the same process claims the job again; the
    first claim's late outcome must not clear the live lease nor end the job.
    """
    [job_id] = queue_notices(conn, 1)
    caplog.set_level(logging.INFO, logger="authsvc.worker")
    [first] = jobs.claim_batch(conn, "host:1:p", 1, lease_seconds=30)
    expire_lease(conn, job_id)
    [second] = jobs.claim_batch(conn, "host:1:p", 1, lease_seconds=30)
    assert (first.attempt_count, second.attempt_count) == (1, 2)
    live = conn.execute(
        "SELECT lease_expires_at, next_attempt_at FROM email_jobs WHERE id = %s", (job_id,)
    ).fetchone()

    assert _record_stale(conn, first, stale) is False
    assert job_status(conn, job_id) == ("pending", "host:1:p", 2), "the stale claim won"
    assert conn.execute(
        "SELECT lease_expires_at, next_attempt_at FROM email_jobs WHERE id = %s", (job_id,)
    ).fetchone() == live
    assert _record(conn, jobs.Outcome(second, "sent", provider_message_id="<m@x>")) is True

    assert job_status(conn, job_id) == ("sent", None, 2)
    lost = [("lease_lost", "host:1:p", 1)] if stale != "release" else []
    assert events(conn, job_id) == [
        ("claimed", "host:1:p", 1),
        ("claimed", "host:1:p", 2),
        *lost,
        ("sent", "host:1:p", 2),
    ]
    logged = [(r.getMessage(), r.attempt) for r in caplog.records
              if r.getMessage() in ("lease_lost", "sent")]
    assert logged == [*(("lease_lost", 1),) * len(lost), ("sent", 2)]


def test_two_quick_resets_send_one_email_with_the_newest_link(
    database_url, conn, svc, settings, smtp
):
    """Done-when 3: the older job is superseded, the one email carries the newest version."""
    actions.sign_up(conn, svc, email="ann@example.com", password="correct horse battery")
    actions.request_password_reset(conn, svc, email="ann@example.com")
    actions.request_password_reset(conn, svc, email="ann@example.com")

    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    resets = [m for m in smtp.messages if m.subject == "Reset your password"]
    assert len(resets) == 1
    user = users.find_user_by_email(conn, "ann@example.com")
    assert user is not None
    assert resets[0].header("X-Authsvc-Token-Version") == str(user.reset_version) == "2"
    older, newer = conn.execute(
        "SELECT id, status FROM email_jobs WHERE template = 'reset' ORDER BY id"
    ).fetchall()
    assert (older[1], newer[1]) == ("superseded", "sent")
    assert [e[0] for e in events(conn, older[0])] == ["claimed", "superseded"]
    assert resets[0].header("X-Authsvc-Job") == public_id_of(conn, newer[0])
    # The link in the email works.
    token = link_token(resets[0].text)
    actions.reset_password(conn, svc, token=token, password="a new long passphrase")


def test_link_email_states_expiry_and_honours_redirect_url(database_url, conn, svc, settings, smtp):
    # The redirect applies because the signup creates the account through this app (SPEC §14).
    app, _key = register_app(conn, "shop", ["https://app.example/welcome"])
    actions.sign_up(conn, svc, email="bo@example.com", password="correct horse battery",
                     redirect_url="https://app.example/welcome?lang=en", app=app)
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    [message] = smtp.messages
    assert message.message_id == message_id_of(conn, job_ids(conn)[0])
    assert "valid for 24 hours" in message.text and "expires at" in message.text
    link = next(w for w in message.text.split() if "token=" in w)
    assert link.startswith("https://app.example/welcome?lang=en&token=")
    html = message.message.get_body(preferencelist=("html",)).get_content()
    assert "token=" in html and "expires at" in html
    user = actions.confirm_verification(conn, svc, token=link_token(message.text))
    assert user.email_verified_at is not None


def job_ids(conn) -> list[int]:
    return [r[0] for r in conn.execute("SELECT id FROM email_jobs ORDER BY id")]


def test_link_that_expired_before_sending_is_not_sent(database_url, conn, svc, settings, smtp):
    conn.execute("INSERT INTO users (email, password_hash) VALUES ('cy@example.com', 'x')")
    issued_at = svc.clock() - timedelta(seconds=settings.reset_ttl + 1)
    budget = ratelimit.hit_for("email_reset", "cy@example.com", settings.rate_limit_email,
                                   svc.clock())
    job_id = count_and_queue_link(
        conn, email="cy@example.com", purpose="reset", issued_at=issued_at, budget=budget,
        code_digest=address_digest("cy@example.com")).job_id
    assert job_id is not None, "the account exists and is within its budget"
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    assert smtp.messages == []
    assert job_status(conn, job_id)[0] == "expired"
    trail = conn.execute(
        "SELECT event, error FROM email_job_events WHERE job_id = %s ORDER BY id", (job_id,)
    ).fetchall()
    assert trail[-1][0] == "expired" and "link expired at" in trail[-1][1]


def test_delivering_one_claimed_job_twice_leaves_one_sent_row(conn, pool, settings, smtp):
    """Done-when 5: run every job twice; same Message-ID, one sent row, nothing overwritten."""
    [job_id] = queue_notices(conn, 1)
    with pool.connection() as c:
        [job] = jobs.claim_batch(c, "tester", 1, lease_seconds=30)
    deliverer = delivery(pool, settings)
    mailer = smtp_factory(smtp.url)(2.0)
    assert deliver_now(pool, deliverer, mailer, job) == "sent"
    first = conn.execute(
        "SELECT status, sent_at, provider_message_id FROM email_jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert deliver_now(pool, deliverer, mailer, job) == "lease_lost"
    mailer.close()

    again = conn.execute(
        "SELECT status, sent_at, provider_message_id FROM email_jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert first == again and first[0] == "sent"
    assert first[2] == message_id_of(conn, job_id)
    assert {m.message_id for m in smtp.messages} == {first[2]}
    assert [e[0] for e in events(conn, job_id)].count("sent") == 1


def _listening(conn) -> bool:
    """Whether a session of this database is LISTENing (a worker's first empty claim is done)."""
    return conn.execute(
        "SELECT 1 FROM pg_stat_activity"
        " WHERE query ILIKE 'LISTEN%%' AND datname = current_database()"
    ).fetchone() is not None


def test_idle_worker_wakes_on_notify_not_on_polling(database_url, conn, svc, settings, smtp):
    w = worker(database_url, settings, smtp.url, svc.clock, poll_seconds=60)
    with running(w):
        wait_until(lambda: _listening(conn), 10, "the worker to LISTEN")
        actions.sign_up(conn, svc, email="di@example.com", password="correct horse battery")
        smtp.wait_for(1, timeout=5)
    assert smtp.messages[0].subject == "Confirm your email address"


def test_the_listener_reconnects_after_any_error_and_says_so(
    database_url, conn, svc, settings, smtp, caplog, monkeypatch
):
    """Not only OperationalError: a listener that died quietly left the worker polling."""
    real_connect = loop.connect
    attempts: list[int] = []

    def lost_once(*args, **kwargs):
        attempts.append(1)
        if len(attempts) == 1:
            raise psycopg.InterfaceError("the connection is lost")
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(loop, "connect", lost_once)
    w = worker(database_url, settings, smtp.url, svc.clock, poll_seconds=60)
    with caplog.at_level(logging.WARNING, logger="authsvc.worker.loop"), running(w):
        wait_until(lambda: _listening(conn), 10, "the worker to LISTEN again")
        actions.sign_up(conn, svc, email="di@example.com", password="correct horse battery")
        smtp.wait_for(1, timeout=5)
    [said] = [r for r in caplog.records if r.msg == "listener_disconnected"]
    assert "InterfaceError" in said.error


def test_sigterm_like_stop_releases_claimed_but_unsent_jobs(database_url, conn, settings):
    """The in-process half of done-when 7: queued claims are handed back, none stay leased."""
    job_ids_ = queue_notices(conn, 10)
    with SmtpDouble(delay_seconds=0.3) as slow:
        w = worker(database_url, settings, slow.url, concurrency=1, batch=10)
        with running(w):
            slow.wait_for_attempts(1)
        sent = len(slow.wait_for(1))
    rows = conn.execute(
        "SELECT status, count(*) FROM email_jobs WHERE lease_owner IS NULL GROUP BY status"
    ).fetchall()
    assert sum(n for _, n in rows) == 10, "a job was left leased"
    assert dict(rows).get("sent", 0) == sent
    released = conn.execute(
        "SELECT count(DISTINCT job_id) FROM email_job_events WHERE event = 'released'"
    ).fetchone()
    assert released[0] == 10 - sent and len(job_ids_) == 10


def test_a_claim_whose_columns_do_not_match_claimed_job_is_refused(conn):
    """Claimed rows are built by position (worker/jobs.py): a reordered RETURNING fails loudly."""
    with conn.cursor(row_factory=jobs._claimed_job_row) as cur, \
            pytest.raises(RuntimeError, match="ClaimedJob has"):
        cur.execute("SELECT 1 AS template, 2 AS id").fetchall()


def test_a_claimed_job_and_its_outcome_never_show_the_sealed_webhook_secret():
    job = jobs.ClaimedJob(7, uuid4(), "email.delivered", "https://app.example/h", {}, None, None,
                          None, None, 1, "w1", datetime.now(UTC), None, False, kind="webhook",
                          webhook_url="https://app.example/h",
                          webhook_secret=b"sealed-secret-bytes")
    assert job.webhook_secret == b"sealed-secret-bytes"
    for shown in (repr(job), repr(jobs.Outcome(job, "sent")), str(job)):
        assert "sealed-secret-bytes" not in shown
        assert "webhook_url='https://app.example/h'" in shown
