"""SPEC §4: no usable token is stored at rest, even after links were sent.

A run of API requests is delivered by the real worker to an SMTP server;
afterwards every table (the test inbox's mailbox aside: it is a mailbox) is
dumped as text and searched for the tokens that were emailed and for anything
token-shaped.
"""

from __future__ import annotations

import re

from authsvc.accounts.tokens import TokenError
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.api_support import ApiCaller, register_shop_app
from tests.worker_support import running, worker

TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{20,}")


def test_no_table_holds_a_usable_token_after_links_were_sent(
    client, conn, database_url, settings, svc
):
    app, key = register_shop_app(conn)
    api = ApiCaller(client, app, key)
    emails = [f"user{i}@example.com" for i in range(3)]
    for email in emails:
        assert (
            api.post("/signups", {"email": email, "password": "correct horse battery"}).status_code
            == 202
        )
        assert api.post("/password-resets", {"email": email}).status_code == 202
        assert api.post("/verifications", {"email": email}).status_code == 202

    with SmtpDouble() as smtp, running(worker(database_url, settings, smtp.url, poll_seconds=0.2)):
        wait_until(
            lambda: conn.execute(
                "SELECT count(*) = 0 FROM email_jobs WHERE status = 'pending'"
            ).fetchone()[0],
            what="the outbox to drain",
        )
        sent_tokens = {
            m.group(1) for r in smtp.wait_for(1) for m in re.finditer(r"token=([\w.-]+)", r.text)
        }
        sent_codes = {
            m.group(1) for r in smtp.wait_for(1)
            for m in re.finditer(r"^\s*(\d{6})\s*$", r.text, re.MULTILINE)
        }
    assert len(sent_tokens) == 6, "one verify and one reset link per address was mailed"
    assert len(sent_codes) == 6, "each with its code"
    for email in emails:  # a wrong try each: the tries are counted, the code is not kept
        wrong = api.post("/verifications/confirm", {"email": email, "code": "x"})
        assert wrong.status_code == 400

    tables = [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
            " AND tablename NOT IN ('inbox_messages', 'inbox_contents')"  # the test inbox's mail
        )
    ]
    dump = " ".join(
        conn.execute(f"SELECT coalesce(string_agg(t::text, ' '), '') FROM {table} t").fetchone()[0]
        for table in tables
    )
    assert "email_jobs" in tables and "idempotency_keys" in tables
    for token in sent_tokens:
        assert token not in dump
    assert conn.execute("SELECT count(*) FROM code_attempts").fetchone() == (3,)
    for code in sent_codes:
        # Standalone: not the microseconds of a timestamp, nor inside a digest.
        assert not re.search(rf"(?<![0-9A-Za-z.]){code}(?![0-9A-Za-z])", dump), code
    assert not TOKEN_SHAPE.search(dump), TOKEN_SHAPE.search(dump)
    # What was mailed still works: the absence above is not an empty run.
    for token in sent_tokens:
        try:
            svc.tokens.read(token, "reset")
        except TokenError:
            svc.tokens.read(token, "verify")
