"""Nothing an outsider sees counts or orders anything across accounts.

The attack: sign up your own address, ask a reset for the target, sign up
again. A reset queues a job only for an existing account, so if the two
emails in your own mailbox carried ordered job ids, a gap of one would mean
"no account" and two "account". The same holds for any sequence that ends up
in a link (user ids), a page (session ids) or an event (email ids).
"""

from __future__ import annotations

import itertools
import json
import re
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import pytest
from itsdangerous import URLSafeSerializer

from authsvc.accounts import actions, users
from authsvc.apps.keys import App
from authsvc.outbox.admin import redrive_job
from tests.accounts_support import one_number
from tests.worker_support import worker

PASSWORD = "correct horse battery staple"


def _job_reference(message) -> tuple[str, str]:
    """The job reference in the Message-ID and in X-Authsvc-Job."""
    match = re.fullmatch(r"<authsvc-job-(.+)@localhost>", message.message_id)
    assert match, message.message_id
    return match.group(1), message.header("X-Authsvc-Job")


def _link_user_id(text: str) -> int:
    """The user id a link carries: readable by its recipient, though not forgeable."""
    link = next(word for word in text.split() if "token=" in word)
    token = parse_qs(urlsplit(link).query)["token"][0]
    payload = URLSafeSerializer("unused").load_payload(token.rsplit(".", 1)[0].encode())
    return int(payload[0])


@pytest.mark.parametrize("target_exists", [True, False])
def test_the_emails_in_my_mailbox_do_not_count_jobs_queued_for_others(
    target_exists, database_url, conn, svc, settings, smtp
):
    if target_exists:
        conn.execute("INSERT INTO users (email, password_hash, email_verified_at)"
                     " VALUES ('target@example.com', 'x', now())")
    actions.sign_up(conn, svc, email="me1@example.com", password=PASSWORD)
    actions.request_password_reset(conn, svc, email="target@example.com")
    actions.sign_up(conn, svc, email="me2@example.com", password=PASSWORD)
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    mine = sorted((m for m in smtp.messages if m.rcpt_tos[0].startswith("me")),
                  key=lambda m: m.rcpt_tos[0])
    assert len(mine) == 2
    for message in mine:
        in_message_id, in_header = _job_reference(message)
        # A random UUID: no order, no gap to measure, stable for the job.
        assert in_message_id == in_header
        assert UUID(in_message_id).version == 4
    stored = {str(r[0]) for r in conn.execute("SELECT public_id FROM email_jobs")}
    assert {_job_reference(m)[0] for m in smtp.messages} <= stored


def test_user_ids_in_links_do_not_count_signups(database_url, conn, svc, settings, smtp):
    for n in range(3):
        actions.sign_up(conn, svc, email=f"me{n}@example.com", password=PASSWORD)
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    ids = sorted(_link_user_id(m.text) for m in smtp.messages)
    assert len(ids) == 3
    # Consecutive signups get ids far apart (odds of a gap under 2^20: ~2e-10 per pair).
    assert all(b - a > 2**20 for a, b in itertools.pairwise(ids))
    # ...and exact in a JSON number (the API's user.id).
    assert all(0 < i < 2**53 for i in ids)


def test_session_ids_on_the_account_page_do_not_count_logins(conn, svc):
    conn.execute("INSERT INTO users (email, password_hash, email_verified_at)"
                 " VALUES ('me@example.com', %s, now())", (svc.passwords.hash(PASSWORD),))
    user = users.find_user_by_email(conn, "me@example.com")
    assert user is not None
    for _ in range(3):
        actions.start_session(conn, svc, user=user, user_agent="test")
    ids = sorted(r[0] for r in conn.execute("SELECT id FROM web_sessions"))
    assert all(b - a > 2**20 for a, b in itertools.pairwise(ids))


def test_email_events_name_the_email_by_its_public_id(database_url, conn, svc, settings, smtp):
    app_id = conn.execute(
        "INSERT INTO apps (name, key_hash, webhook_url, webhook_secret)"
        " VALUES ('shop', '\\x01', 'https://shop.example/hooks', '\\x02') RETURNING id"
    ).fetchone()[0]
    actions.sign_up(conn, svc, email="me@example.com", password=PASSWORD,
                     app=App(app_id, "shop", []))
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    [message] = smtp.messages
    [payload] = [r[0] for r in conn.execute(
        "SELECT payload FROM email_jobs WHERE kind = 'webhook' AND template = 'email.delivered'")]
    event = payload["event"] if isinstance(payload, dict) else json.loads(payload)["event"]
    assert event["data"]["email"]["id"] == _job_reference(message)[0]
    assert UUID(event["data"]["email"]["id"]).version == 4


def test_a_failed_job_without_a_public_id_gets_one_when_redriven(
    database_url, conn, settings, smtp
):
    """Jobs that failed before public ids existed still have none (public_id stays
    nullable); a redrive is the one way they are sent again, and it gives them theirs."""
    failed = one_number(
        conn, "INSERT INTO email_jobs (template, recipient, status, public_id)"
        " VALUES ('password_changed', 'old@example.com', 'failed', NULL) RETURNING id")
    assert redrive_job(conn, failed)
    row = conn.execute("SELECT public_id FROM email_jobs WHERE id = %s", (failed,)).fetchone()
    assert row is not None and UUID(str(row[0])).version == 4
    worker(database_url, settings, smtp.url, once=True).run()
    [message] = smtp.messages
    assert message.message_id == f"<authsvc-job-{row[0]}@localhost>"
