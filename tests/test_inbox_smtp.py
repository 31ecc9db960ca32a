"""The SMTP sink: what it accepts, refuses and stores, in-process and as `authsvc inbox`."""

from __future__ import annotations

import os
import signal
import smtplib
import socket
import subprocess
import sys
import time

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from authsvc.inbox import smtp
from authsvc.inbox.messages import insert_content, insert_message
from authsvc.inbox.parsing import parse_message
from testkit.waiting import free_port, wait_until
from tests.inbox_support import email, running_sink, send

pytestmark = pytest.mark.sink(max_message_bytes=64 * 1024)  # the `sink` fixture's limit


def stored(conn: psycopg.Connection, scope: str) -> list[tuple]:
    return conn.execute(
        "SELECT recipients, mail_from, subject, text_body, links FROM inbox_messages AS m"
        " JOIN inbox_contents AS c ON c.id = m.content_id WHERE scope = %s ORDER BY m.id",
        (scope,),
    ).fetchall()


def test_non_ascii_display_names_and_subjects_are_decoded(sink, conn):
    message = email(
        "zoe+intl@inbox.test",
        subject="Bestätigen Sie Ihre E-Mail — 確認 ✉",
        sender="Jörg Müller <no-reply@example.com>",
        text="Grüße: https://app.example/verify?token=äbc",
    )
    send(sink.port, message)
    [(_to, sender, subject, text, links)] = stored(conn, "intl")
    assert sender == "Jörg Müller <no-reply@example.com>"
    assert subject == "Bestätigen Sie Ihre E-Mail — 確認 ✉"
    assert "Grüße" in text
    assert links == ["https://app.example/verify?token=äbc"]


def test_smtputf8_addresses_are_accepted_and_scoped(sink, conn):
    message = email("jörg+läuft@inbox.test", sender="Absender <absender@bücher.example>")
    with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
        client.ehlo()
        assert client.has_extn("smtputf8")
        client.send_message(message)  # switches to SMTPUTF8 for the non-ASCII addresses
    [(to, sender, *_)] = stored(conn, "läuft")
    assert to == ["jörg+läuft@inbox.test"]
    assert sender == "Absender <absender@bücher.example>"


def test_oversize_message_is_refused_with_552(sink, conn):
    big = email("big@inbox.test", text="x" * (70 * 1024))
    with pytest.raises(smtplib.SMTPResponseException) as refused:
        send(sink.port, big)
    assert refused.value.smtp_code == 552
    assert stored(conn, "big") == []


def test_foreign_domain_is_refused_with_550(sink, conn):
    with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
        send(sink.port, email("someone@example.com"))
    [(code, reason)] = refused.value.recipients.values()
    assert code == 550 and b"inbox.test" in reason
    assert conn.execute("SELECT count(*) FROM inbox_messages").fetchone() == (0,)


def test_foreign_recipient_among_good_ones_is_refused_alone(sink, conn):
    with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
        refused = client.send_message(
            email(["a+mixed@inbox.test", "b@example.com"]),
            to_addrs=["a+mixed@inbox.test", "b@example.com"],
        )
    assert refused == {"b@example.com": (550, refused["b@example.com"][1])}
    assert [row[0] for row in stored(conn, "mixed")] == [["a+mixed@inbox.test"]]


def test_several_recipients_in_several_scopes(sink, conn):
    recipients = [
        "ann+one@inbox.test", "bob+two@inbox.test", "cat+one@inbox.test", "two@inbox.test"
    ]
    send(sink.port, email(recipients, subject="to everyone"), recipients)
    assert [r[0] for r in stored(conn, "one")] == [["ann+one@inbox.test", "cat+one@inbox.test"]]
    assert [r[0] for r in stored(conn, "two")] == [["bob+two@inbox.test", "two@inbox.test"]]
    assert {r[2] for r in stored(conn, "one") + stored(conn, "two")} == {"to everyone"}


@pytest.mark.parametrize(
    "raw",
    [
        b"this is not a MIME message at all \xff\xfe\x00 https://x.example/a\r\n",
        b"Subject: =?bogus-charset?Q?broken?=\r\nContent-Type: multipart/mixed\r\n\r\n"
        b"no boundary\r\n",
        b"Subject: half\r\nContent-Type: multipart/alternative; boundary=XX\r\n\r\n--XX\r\n"
        b"Content-Type: text/plain; charset=no-such-charset\r\nContent-Transfer-Encoding: base64"
        b"\r\n\r\n!!!not base64!!!\r\n--XX\r\nContent-Type: text/html\r\n\r\n<a href='https://y.example/b",
        b"From: \xc3\x28 <bad utf8>\r\nSubject: \xe2\x82\r\nMessage-ID: <\x01weird>\r\n"
        b"\r\nbody\r\n",
    ],
    ids=["binary-no-headers", "multipart-no-boundary", "bad-charset-and-base64", "bad-utf8"],
)
def test_malformed_mime_is_stored_without_crashing(sink, conn, raw):
    with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
        client.sendmail("x@example.com", ["weird@inbox.test"], raw)
    [[stored_raw]] = conn.execute(
        "SELECT raw FROM inbox_messages AS m JOIN inbox_contents AS c ON c.id = m.content_id"
        " WHERE scope = 'weird'"
    ).fetchall()
    assert bytes(stored_raw).rstrip(b"\r\n") == raw.rstrip(b"\r\n")
    send(sink.port, email("weird@inbox.test", subject="next one"))  # the sink is still healthy
    assert stored(conn, "weird")[-1][2] == "next one"


def test_links_before_broken_html_are_kept(sink, conn):
    html = '<a href="https://before.example/x?a=1&amp;b=2">ok</a><![bogus[ <a href="https://after">'
    send(sink.port, email("html@inbox.test", text="no links here", html=html))
    [(*_, links)] = stored(conn, "html")
    assert links[0] == "https://before.example/x?a=1&b=2"


def test_duplicates_are_stored(sink, conn):
    message = email("dup@inbox.test", message_id="<authsvc-job-9@localhost>")
    send(sink.port, message)
    send(sink.port, message)
    ids = conn.execute(
        "SELECT message_id FROM inbox_messages AS m JOIN inbox_contents AS c"
        " ON c.id = m.content_id WHERE scope = 'dup'"
    ).fetchall()
    assert ids == [("<authsvc-job-9@localhost>",)] * 2


def test_unusable_local_part_is_refused(sink):
    with pytest.raises(smtplib.SMTPRecipientsRefused) as refused:
        send(sink.port, email("x@inbox.test"), ['"a b"@inbox.test'])
    [(code, _)] = refused.value.recipients.values()
    assert code == 553


def _inbox_command(env: dict[str, str], *args: str) -> list[str]:
    return [sys.executable, "-m", "authsvc.cli", "inbox", *args]


@pytest.mark.e2e
def test_inbox_command_receives_mail_and_stops_on_sigterm(env, conn):
    port = free_port()
    process = subprocess.Popen(
        _inbox_command(env, "--port", str(port)),
        env={**os.environ, **env, "AUTHSVC_TEST_INBOX": "on"},
        stderr=subprocess.PIPE,
    )
    try:
        def accepting() -> bool:
            try:
                send(port, email("cli@inbox.test", subject="via the command"))
            except OSError:
                return False
            return True

        wait_until(accepting, timeout=20, what="authsvc inbox to accept mail")
        assert stored(conn, "cli")[0][2] == "via the command"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0


@pytest.mark.e2e
def test_inbox_command_refuses_when_the_inbox_is_off(env):
    port = free_port()
    result = subprocess.run(
        _inbox_command(env, "--port", str(port)),
        env={**os.environ, **env, "AUTHSVC_TEST_INBOX": "off"},
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert "test inbox is off" in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(OSError):
        smtplib.SMTP("127.0.0.1", port, timeout=2)


@pytest.mark.e2e
def test_inbox_command_refuses_in_production(env):
    production = {
        **env, "AUTHSVC_ENV": "production", "AUTHSVC_TEST_INBOX": "on",
        "AUTHSVC_SMTP_URL": "smtp://mail.example:25", "AUTHSVC_BASE_URL": "https://auth.example",
    }
    result = subprocess.run(
        _inbox_command(env), env={**os.environ, **production},
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    assert "AUTHSVC_TEST_INBOX: the test inbox is refused in production" in result.stderr
    assert "Traceback" not in result.stderr


class _Clock:
    """Stands in for the `time` module of authsvc.inbox.smtp: a monotonic clock we move."""

    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


def _store_old_message(pool: ConnectionPool, scope: str) -> None:
    raw = email(f"{scope}@inbox.test").as_bytes()
    with pool.connection() as conn, conn.transaction():
        content_id = insert_content(conn, parse_message(raw), raw, None)
        insert_message(conn, scope, [f"{scope}@inbox.test"], content_id)
        conn.execute("UPDATE inbox_messages SET received_at = now() - interval '25 hours'")


def test_a_failing_prune_never_changes_the_reply_to_a_stored_message(
    pool, conn, monkeypatch, caplog
):
    clock = _Clock(1_000_000.0)
    monkeypatch.setattr(smtp, "time", clock, raising=False)

    def broken_prune(*_args: object, **_kwargs: object) -> int:
        raise psycopg.OperationalError("prune failed")

    monkeypatch.setattr(smtp, "prune_messages", broken_prune)
    with running_sink(pool) as sink:
        clock.now += smtp.PRUNE_INTERVAL_SECONDS + 1  # a prune is due
        send(sink.port, email("prune@inbox.test"))  # 250, not 451: it was stored
    assert len(stored(conn, "prune")) == 1
    assert "inbox_prune_failed" in [r.getMessage() for r in caplog.records]


def test_the_sink_prunes_at_start_on_a_freshly_booted_host(pool, conn, monkeypatch):
    _store_old_message(pool, "stale")
    monkeypatch.setattr(smtp, "time", _Clock(5.0), raising=False)  # up for 5 s
    with running_sink(pool):
        pass
    assert stored(conn, "stale") == []


def test_the_sink_prunes_periodically_without_mail(pool, conn):
    with running_sink(pool, prune_interval=0.05):
        _store_old_message(pool, "later")
        wait_until(lambda: stored(conn, "later") == [], what="the periodic prune")


@pytest.mark.e2e
def test_inbox_command_fails_at_once_on_a_taken_port(env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        result = subprocess.run(
            _inbox_command(env, "--port", str(port)),
            env={**os.environ, **env, "AUTHSVC_TEST_INBOX": "on"},
            capture_output=True, text=True, timeout=60,
        )
        elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    # Well under the run's 60 s timeout, which a command that kept retrying would reach;
    # start-up alone (imports, a database connection) can take seconds on a busy machine.
    assert elapsed < 30, f"took {elapsed:.1f} s to report a taken port"


@pytest.mark.parametrize(
    ("recipient", "scope", "stored_as"),
    [
        ("İ@inbox.test", "i\u0307", "İ@inbox.test"),  # "İ".lower() is i + combining dot
        # decomposed: the same scope as the composed `läuft`
        ("jo\u0308rg+la\u0308uft@inbox.test", "läuft", "jo\u0308rg+la\u0308uft@inbox.test"),
        # a quoted local part is read unquoted...
        ('"a b+quoted"@inbox.test', "quoted", '"a b+quoted"@inbox.test'),
        # ...and one that needs no quotes arrives unquoted from aiosmtpd already
        ('"plain"@inbox.test', "plain", "plain@inbox.test"),
    ],
)
def test_unusual_but_valid_local_parts_are_accepted(sink, conn, recipient, scope, stored_as):
    send(sink.port, email("x@inbox.test"), [recipient])
    assert [row[0] for row in stored(conn, scope)] == [[stored_as]]
