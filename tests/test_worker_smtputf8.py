"""Non-ASCII addresses (jörg@example.com): SMTPUTF8 when offered, else a per-job failure.

An address the connection cannot encode must never stop the worker: it is
one job's problem, recorded on that job, while the others are delivered.
"""

from __future__ import annotations

from uuid import uuid4

import pytest

from authsvc.outbox import enqueue_email
from authsvc.worker import jobs
from authsvc.worker.mailers import OutgoingEmail, PermanentSendError
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.worker_support import (
    deliver_now,
    delivery,
    events,
    job_status,
    message_id_of,
    queue_notices,
    running,
    smtp_factory,
    worker,
)

JOERG = "jörg@example.com"


def queue_joerg(conn) -> int:
    """A notice to a non-ASCII address, queued (and NOTIFYed) like the web side does."""
    with conn.transaction():
        [user_id] = conn.execute(
            "INSERT INTO users (email, password_hash) VALUES (%s, 'x') RETURNING id", (JOERG,)
        ).fetchone()
        return enqueue_email(conn, template="password_changed", recipient=JOERG, user_id=user_id)


def queue_one_more(conn) -> int:
    with conn.transaction():
        [user_id] = conn.execute(
            "INSERT INTO users (email, password_hash) VALUES ('late@example.com', 'x')"
            " RETURNING id"
        ).fetchone()
        return enqueue_email(
            conn, template="password_changed", recipient="late@example.com", user_id=user_id
        )


def assert_still_running(conn, w, smtp: SmtpDouble, already: int) -> None:
    """The worker did not stop: it picks up a job queued after the non-ASCII one."""
    late = queue_one_more(conn)
    smtp.wait_for(already + 1)
    wait_until(lambda: job_status(conn, late)[0] == "sent", 10, "the late job to be recorded")
    assert not w.stop.is_set() and w.failure is None


def test_non_ascii_recipient_is_sent_with_smtputf8_and_the_worker_keeps_going(
    database_url, conn, settings
):
    joerg = queue_joerg(conn)  # oldest: the first job the single sender takes
    others = queue_notices(conn, 3)
    with SmtpDouble(smtputf8=True) as smtp:
        w = worker(database_url, settings, smtp.url, concurrency=1, batch=10, poll_seconds=0.2)
        with running(w):
            received = smtp.wait_for(4)
            wait_until(
                lambda: all(job_status(conn, j)[0] == "sent" for j in [joerg, *others]),
                10, "every job to be recorded as sent",
            )
            assert_still_running(conn, w, smtp, 4)

    [to_joerg] = [m for m in received if m.rcpt_tos == [JOERG]]
    assert to_joerg.message_id == message_id_of(conn, joerg)
    # The header carries the address as UTF-8, not as an RFC 2047 encoded-word.
    assert f"\r\nTo: {JOERG}\r\n".encode() in to_joerg.data
    provider_id = conn.execute(
        "SELECT provider_message_id FROM email_jobs WHERE id = %s", (joerg,)
    ).fetchone()[0]
    assert provider_id == to_joerg.message_id
    assert {m.message_id for m in received} == {
        message_id_of(conn, j) for j in [joerg, *others]
    }


def test_non_ascii_recipient_fails_the_job_when_the_server_lacks_smtputf8(
    database_url, conn, settings
):
    joerg = queue_joerg(conn)
    others = queue_notices(conn, 3)
    with SmtpDouble() as smtp:  # aiosmtpd's default: no SMTPUTF8
        w = worker(database_url, settings, smtp.url, concurrency=1, batch=10, poll_seconds=0.2)
        with running(w):
            received = smtp.wait_for(3)
            wait_until(lambda: job_status(conn, joerg)[0] == "failed", 10, "the job to fail")
            assert_still_running(conn, w, smtp, 3)

    assert all(job_status(conn, j)[0] == "sent" for j in others)
    assert all(m.rcpt_tos != [JOERG] for m in received)
    status, error, attempts = conn.execute(
        "SELECT status, last_error, attempt_count FROM email_jobs WHERE id = %s", (joerg,)
    ).fetchone()
    assert (status, attempts) == ("failed", 1)
    assert error == "recipient needs SMTPUTF8, which the server does not offer"
    assert [e[0] for e in events(conn, joerg)] == ["claimed", "failed"]


def test_an_address_the_session_cannot_encode_is_a_permanent_failure_of_that_message():
    """Any encoding error in the SMTP session is this message's fault, not the process's."""
    unencodable = OutgoingEmail(  # a lone surrogate: not even UTF-8 can carry it
        1, uuid4(), "noreply@localhost", "j\udcf6rg@example.com", "<authsvc-job-1@localhost>",
        b"Subject: x\r\n\r\nbody\r\n",
    )
    fine = OutgoingEmail(
        2, uuid4(), "noreply@localhost", "ann@example.com", "<authsvc-job-2@localhost>",
        b"Subject: y\r\n\r\nbody\r\n",
    )
    with SmtpDouble(smtputf8=True) as smtp:
        mailer = smtp_factory(smtp.url)(2.0)
        try:
            with pytest.raises(PermanentSendError, match="RCPT: cannot encode"):
                mailer.send(unencodable)
            # The half-open transaction was reset: the connection still delivers.
            assert mailer.send(fine) == "<authsvc-job-2@localhost>"
        finally:
            mailer.close()
        [message] = smtp.wait_for(1)
    assert message.rcpt_tos == ["ann@example.com"]


class _EncodingMailer:
    """A provider that lets an encoding error escape (as smtplib's did)."""

    def __init__(self) -> None:
        self.closed = 0

    def send(self, email: OutgoingEmail) -> str:
        email.recipient.encode("ascii")
        return email.message_id

    def close(self) -> None:
        self.closed += 1


def test_an_encoding_error_escaping_a_mailer_fails_only_that_job(conn, pool, settings):
    joerg = queue_joerg(conn)
    [other] = queue_notices(conn, 1)
    with pool.connection() as c:
        first, second = jobs.claim_batch(c, "tester", 2, lease_seconds=30)
    mailer = _EncodingMailer()
    deliverer = delivery(pool, settings)

    assert first.id == joerg and deliver_now(pool, deliverer, mailer, first) == "failed"
    assert deliver_now(pool, deliverer, mailer, second) == "sent"

    status, error = conn.execute(
        "SELECT status, last_error FROM email_jobs WHERE id = %s", (joerg,)
    ).fetchone()
    assert status == "failed" and error.startswith("cannot encode the message:")
    assert "UnicodeEncodeError" in error
    assert job_status(conn, other)[0] == "sent"
    assert mailer.closed == 1, "a mailer in an unknown state must drop its connection"
