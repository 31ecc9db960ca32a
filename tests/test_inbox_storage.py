"""What the test inbox keeps on disk: a message once per SMTP transaction, within a byte budget.

A message to many scopes used to be stored whole once per scope (1 MiB to 100
scopes took 217 MB), and nothing bounded the inbox as a whole.
"""

from __future__ import annotations

import secrets
import smtplib
from collections.abc import Iterator
from email.message import EmailMessage
from email.policy import SMTP

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from authsvc.config import ConfigError, load_settings
from authsvc.inbox import messages
from authsvc.inbox.params import Filters
from authsvc.inbox.parsing import parse_message
from tests.inbox_support import email, running_sink

MIB = 1024 * 1024
SCOPES = 100


def _inbox_bytes(conn: psycopg.Connection) -> int:
    """Every inbox table's size on disk, TOAST and indexes included."""
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(oid)), 0) FROM pg_class"
        " WHERE relkind = 'r' AND relname LIKE 'inbox%%'"
    ).fetchone()
    assert row is not None
    return int(row[0])


def _noise(size: int) -> str:
    """Text PostgreSQL cannot compress: each stored copy costs its full size."""
    line = 76
    blob = secrets.token_urlsafe(size)[:size]
    return "\n".join(blob[i : i + line] for i in range(0, len(blob), line))


def _wire(message: EmailMessage) -> bytes:
    """The bytes as a client sends them (CRLF line ends)."""
    return message.as_bytes(policy=SMTP)


def _transaction(port: int, recipients: list[str], message: bytes) -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as client:
        client.sendmail("qa@example.com", recipients, message)


def _recipients(tag: str, count: int) -> list[str]:
    return [f"qa+{tag}{n}@inbox.test" for n in range(count)]


def test_one_mib_to_100_scopes_is_stored_once(pool, conn, inbox):
    text = "Open https://app.example/verify?token=once\n" + _noise(MIB)
    message = _wire(email("qa@inbox.test", subject="to everyone", text=text))
    recipients = _recipients("wide", SCOPES)
    before = _inbox_bytes(conn)
    with running_sink(pool) as sink:
        _transaction(sink.port, recipients, message)
    grown = _inbox_bytes(conn) - before
    # Raw bytes and the parsed text, once: about 2 MiB, not 100 times that.
    assert grown < 5 * MIB, f"{SCOPES} scopes took {grown / MIB:.1f} MiB"

    # Every scope still answers with the whole message, as before.
    answers = []
    for n, address in enumerate(recipients):
        [listed] = inbox.get(f"/_inbox/scopes/wide{n}/messages?bodies=0").json["messages"]
        assert listed["to"] == [address] and listed["scope"] == f"wide{n}"
        whole = inbox.get(f"/_inbox/scopes/wide{n}/messages/{listed['id']}").json["message"]
        answers.append(whole)
        if n in (0, SCOPES - 1):
            raw = inbox.get(f"/_inbox/scopes/wide{n}/messages/{listed['id']}/raw")
            assert raw.data == message
    assert len({a["id"] for a in answers}) == SCOPES
    assert all(a["text"] == answers[0]["text"] and a["size"] == len(message) for a in answers)
    assert answers[0]["links"] == ["https://app.example/verify?token=once"]


def test_the_shared_body_is_freed_when_no_scope_keeps_it(pool, conn, inbox):
    message = _wire(email("qa@inbox.test", text=_noise(64 * 1024)))
    with running_sink(pool, max_per_scope=1) as sink:
        _transaction(sink.port, _recipients("keep", 3), message)
        assert inbox.delete("/_inbox/scopes/keep0").status_code == 204
        # The per-scope cap drops keep1's only message; keep2 still holds the body.
        _transaction(sink.port, ["qa+keep1@inbox.test"], b"Subject: newer\r\n\r\nx\r\n")
        [kept] = inbox.get("/_inbox/scopes/keep2/messages").json["messages"]
        assert kept["size"] == len(message)
        assert conn.execute("SELECT count(*) FROM inbox_contents").fetchone() == (2,)
        conn.execute("UPDATE inbox_messages SET received_at = now() - interval '25 hours'")
        sink.handler.prune()
    assert conn.execute("SELECT count(*) FROM inbox_contents").fetchone() == (0,)
    assert conn.execute("SELECT sum(bytes) FROM inbox_usage_deltas").fetchone() == (0,)


BUDGET = 256 * 1024


@pytest.fixture
def small_sink(pool: ConnectionPool) -> Iterator[int]:
    with running_sink(pool, max_total_bytes=BUDGET) as sink:
        yield sink.port


def test_a_full_inbox_answers_452_and_takes_mail_again_once_emptied(small_sink, inbox):
    # Stored twice over: raw bytes and parsed text, ~2 x 70 KiB = 140 KiB each.
    piece = _wire(email("qa@inbox.test", text=_noise(70 * 1024)))
    _transaction(small_sink, ["qa+full@inbox.test"], piece)
    with smtplib.SMTP("127.0.0.1", small_sink, timeout=10) as client:
        client.ehlo()
        # Without SIZE the recipient is taken; the data would go over the budget.
        assert client.mail("qa@example.com")[0] == 250
        assert client.rcpt("qa+full@inbox.test")[0] == 250
        code, reply = client.data(piece)
        assert code == 452 and b"4.3.1" in reply, reply
        client.rset()
        # A declared SIZE that cannot fit beside what is stored: refused at RCPT.
        bigger = _wire(email("qa@inbox.test", text=_noise(120 * 1024)))
        assert client.mail("qa@example.com", [f"SIZE={len(bigger)}"])[0] == 250
        code, reply = client.rcpt("qa+full@inbox.test")
        assert code == 452 and b"4.3.1" in reply, reply
        client.rset()
        # A message that could never fit the budget is not worth retrying: 552,
        # at RCPT when its SIZE says so, else at DATA.
        huge = _wire(email("qa@inbox.test", text=_noise(BUDGET)))
        assert client.mail("qa@example.com", [f"SIZE={BUDGET + 1}"])[0] == 250
        assert client.rcpt("qa+full@inbox.test")[0] == 552
        client.rset()
        assert client.mail("qa@example.com")[0] == 250
        assert client.rcpt("qa+full@inbox.test")[0] == 250
        code, reply = client.data(huge)
        assert code == 552 and b"5.3.4" in reply, reply
    assert len(inbox.get("/_inbox/scopes/full/messages").json["messages"]) == 1

    assert inbox.delete("/_inbox/scopes/full").status_code == 204
    _transaction(small_sink, ["qa+full@inbox.test"], piece)
    assert len(inbox.get("/_inbox/scopes/full/messages").json["messages"]) == 1


def test_the_budget_is_a_validated_setting(env):
    assert load_settings(env).test_inbox_max_bytes == 256 * MIB
    assert load_settings({**env, "AUTHSVC_TEST_INBOX_MAX_BYTES": "64M"}).test_inbox_max_bytes == (
        64 * MIB
    )
    assert load_settings({**env, "AUTHSVC_TEST_INBOX_MAX_BYTES": "1g"}).test_inbox_max_bytes == (
        1024 * MIB
    )
    for bad in ("lots", "0", "-5M", "512", "2T", "1.5G"):
        with pytest.raises(ConfigError) as refused:
            load_settings({**env, "AUTHSVC_TEST_INBOX_MAX_BYTES": bad})
        assert any(p.startswith("AUTHSVC_TEST_INBOX_MAX_BYTES") for p in refused.value.problems)


def test_the_byte_figure_follows_every_write_of_the_contents(conn):
    """inbox_usage_deltas is kept by the contents' own triggers, whoever writes them: a
    store, an UPDATE, a scope's delete (its last row frees the content) and the prune."""
    shared = messages.insert_content(
        conn, parse_message(b"Subject: two\r\n\r\nbody\r\n"), b"two", None)
    for scope in ("one", "two"):
        messages.insert_message(conn, scope, [scope + "@inbox.test"], shared)
    own = messages.insert_content(
        conn, parse_message(b"Subject: one\r\n\r\nx\r\n"), b"one!", None)
    messages.insert_message(conn, "one", ["one@inbox.test"], own)

    def size(content_id: int) -> int:
        row = conn.execute("SELECT stored_bytes FROM inbox_contents WHERE id = %s",
                           (content_id,)).fetchone()
        assert row is not None
        return int(row[0])

    assert messages.inbox_usage(conn) == size(shared) + size(own)
    conn.execute("UPDATE inbox_contents SET text_body = 'a longer body' WHERE id = %s", (own,))
    assert messages.inbox_usage(conn) == size(shared) + size(own)
    assert messages.delete_scope(conn, "one") == 2
    assert messages.inbox_usage(conn) == size(shared)  # "two" still holds the shared one
    conn.execute("UPDATE inbox_messages SET received_at = now() - interval '25 hours'")
    messages.prune_messages(conn)
    assert conn.execute("SELECT count(*) FROM inbox_contents").fetchone() == (0,)
    assert messages.inbox_usage(conn) == 0


def test_what_a_long_poll_counts_and_what_the_listing_returns_is_one_rule(conn):
    """A listing is the ids scan_scope (a poll's check) finds, summarised, so the two cannot
    drift apart; scan_scope reads inbox_visible_messages, which is inlined, so the (scope, id)
    index serves it and no row is read whole."""
    conn.execute("""
        WITH c AS (
            INSERT INTO inbox_contents (mail_from, subject, raw, text_body)
            SELECT 'a@b', 'subject ' || g, 'raw', 'text ' || g
            FROM generate_series(1, 2000) AS g RETURNING id)
        INSERT INTO inbox_messages (scope, recipients, content_id)
        SELECT 'scope' || id % 100, ARRAY['x+scope' || id % 100 || '@inbox.test'], id FROM c
    """)
    conn.execute("ANALYZE inbox_messages")
    conn.execute("ANALYZE inbox_contents")
    query = messages.Q["scan_scope"]
    assert "inbox_visible_messages(" in query
    assert "ILIKE" not in query and "received_at >" not in query  # no second copy
    for filters in (Filters(), Filters(to="x", subject="s", q="t")):
        params = messages.scan_params("scope7", 0, filters, 10)
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + query, params))
        assert "inbox_messages_scope" in plan, plan
        assert "Function Scan on inbox_visible_messages" not in plan, plan
    page = messages.list_messages(conn, "scope7", limit=500, bodies=False)
    listed = [m.id for m in page.messages]
    assert [s.id for s in messages.scan_scope(conn, "scope7")] == listed and len(listed) == 20
