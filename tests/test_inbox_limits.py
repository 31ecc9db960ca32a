"""The test inbox's bounds: recipients, the per-scope cap, listing budgets, filters, scopes."""

from __future__ import annotations

import smtplib
import tracemalloc

import pytest

from authsvc.inbox import messages
from authsvc.inbox.smtp import MAX_RECIPIENTS
from tests.inbox_support import (
    email,
    running_sink,
    send,
)

MB = 1024 * 1024


def _store_big(conn, scope: str, count: int, body_bytes: int) -> None:
    # Built by the server: twenty 4 MB rows in a second, not twenty SMTP sessions.
    conn.execute(
        "WITH contents AS ("
        "  INSERT INTO inbox_contents (subject, text_body, raw)"
        "  SELECT 'big ' || n, repeat('x', %s), convert_to('raw', 'UTF8')"
        "  FROM generate_series(1, %s) AS n RETURNING id)"
        " INSERT INTO inbox_messages (scope, recipients, content_id)"
        " SELECT %s, ARRAY[%s], id FROM contents ORDER BY id",
        (body_bytes, count, scope, f"{scope}@inbox.test"),
    )


def test_the_101st_recipient_gets_452_and_the_first_100_get_the_message(sink, inbox):
    recipients = [f"r{n}+many@inbox.test" for n in range(MAX_RECIPIENTS + 1)]
    with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
        client.ehlo()
        client.mail("sender@example.com")
        replies = [client.rcpt(address)[0] for address in recipients]
        assert replies == [250] * MAX_RECIPIENTS + [452]
        code, _ = client.data(email(recipients[:3]).as_bytes())
        assert code == 250
    listed = inbox.get("/_inbox/scopes/many/messages").json["messages"]
    assert len(listed) == 1, "one scope, one stored message, however many recipients"
    assert listed[0]["to"] == recipients[:MAX_RECIPIENTS]


def test_a_message_over_the_size_limit_is_refused_with_552(pool):
    with running_sink(pool, max_message_bytes=64 * 1024) as small:
        with pytest.raises(smtplib.SMTPResponseException) as refused:
            send(small.port, email("big@inbox.test", text="y" * 100_000))
        assert refused.value.smtp_code == 552


def test_the_per_scope_cap_drops_the_oldest_first(pool, inbox, conn):
    with running_sink(pool, max_per_scope=3) as capped:
        for n in range(5):
            send(capped.port, email("capped@inbox.test", subject=f"m{n}"))
    listed = inbox.get("/_inbox/scopes/capped/messages").json["messages"]
    assert [m["subject"] for m in listed] == ["m2", "m3", "m4"]
    [(stored,)] = conn.execute("SELECT count(*) FROM inbox_messages WHERE scope = 'capped'")
    assert stored == 3


def test_a_4_mb_message_is_listed_without_its_body_and_fetched_whole(sink, inbox):
    text = "Open https://app.example/verify?token=big\n" + "z" * (4 * MB)
    send(sink.port, email("huge@inbox.test", text=text))
    [listed] = inbox.get("/_inbox/scopes/huge/messages").json["messages"]
    assert listed["body_omitted"] is True and listed["text"] is None
    assert listed["size"] > 4 * MB
    assert listed["links"] == ["https://app.example/verify?token=big"]
    whole = inbox.get(f"/_inbox/scopes/huge/messages/{listed['id']}").json["message"]
    assert whole["body_omitted"] is False and len(whole["text"]) > 4 * MB
    one = inbox.get("/_inbox/scopes/huge/expect-one?settle=0").json["message"]
    assert one["id"] == listed["id"] and one["body_omitted"] is True


def test_listing_twenty_4_mb_messages_keeps_a_request_s_memory_bounded(inbox, conn):
    _store_big(conn, "heavy", 20, 4 * MB)
    inbox.get("/_inbox/scopes/heavy/messages?bodies=0")  # warm imports and prepared plans
    tracemalloc.start()
    try:
        response = inbox.get("/_inbox/scopes/heavy/messages")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    listed = response.json["messages"]
    assert len(listed) == 20
    assert sum(m["text"] is not None for m in listed) == 0  # each is over the inline limit
    assert len(response.data) < 1 * MB
    # 80 MB stored; the answer's Python allocations stay near the body budget.
    assert peak < 3 * messages.BODY_BUDGET_BYTES, f"peak {peak / MB:.1f} MB"


def test_small_bodies_are_inlined_only_up_to_the_answer_s_budget(inbox, conn):
    _store_big(conn, "medium", 10, 900 * 1024)  # each under the inline limit
    listed = inbox.get("/_inbox/scopes/medium/messages").json["messages"]
    inlined = [m for m in listed if not m["body_omitted"]]
    assert len(listed) == 10
    assert len(inlined) == messages.BODY_BUDGET_BYTES // (900 * 1024)
    assert [m["id"] for m in inlined] == [m["id"] for m in listed[: len(inlined)]]


def test_listings_page_with_limit_and_next_since(sink, inbox):
    for n in range(5):
        send(sink.port, email("paged@inbox.test", subject=f"p{n}"))
    first = inbox.get("/_inbox/scopes/paged/messages?limit=2").json
    assert [m["subject"] for m in first["messages"]] == ["p0", "p1"] and first["more"] is True
    rest = inbox.get(f"/_inbox/scopes/paged/messages?limit=10&since={first['next_since']}").json
    assert [m["subject"] for m in rest["messages"]] == ["p2", "p3", "p4"]
    assert rest["more"] is False
    bare = inbox.get("/_inbox/scopes/paged/messages?bodies=0").json["messages"]
    assert all(m["text"] is None and m["body_omitted"] for m in bare)


def test_filters_by_recipient_subject_and_text(sink, inbox):
    send(sink.port, email("ann+find@inbox.test", subject="Confirm your email", text="code 123456"))
    send(sink.port, email("bob+find@inbox.test", subject="Reset your password", text="100%_off"))
    send(sink.port, email("bob+find@inbox.test", subject="Password changed", text="nothing"))

    def subjects(query: str) -> list[str]:
        response = inbox.get(f"/_inbox/scopes/find/messages?{query}")
        assert response.status_code == 200, response.json
        return [m["subject"] for m in response.json["messages"]]

    assert subjects("to=ANN") == ["Confirm your email"]
    assert subjects("to=bob%2Bfind") == ["Reset your password", "Password changed"]
    assert subjects("subject=password") == ["Reset your password", "Password changed"]
    assert subjects("q=123456") == ["Confirm your email"]
    assert subjects("q=100%25_off") == ["Reset your password"]  # % and _ are literal
    assert subjects("q=0%25") == ["Reset your password"]
    assert subjects("q=_") == ["Reset your password"]
    assert subjects("to=bob&subject=changed") == ["Password changed"]
    response = inbox.get("/_inbox/scopes/find/expect-one?settle=0&to=ann")
    assert response.status_code == 200
    assert response.json["message"]["subject"] == "Confirm your email"
    assert inbox.get("/_inbox/scopes/find/messages?q=" + "x" * 201).status_code == 400


def test_the_scope_list_shows_recent_scopes_newest_first(sink, inbox):
    send(sink.port, email("first@inbox.test", subject="one"))
    send(sink.port, email("second@inbox.test", subject="two"))
    send(sink.port, email("second@inbox.test", subject="three"))
    scopes = inbox.get("/_inbox/scopes").json["scopes"]
    assert [(s["scope"], s["messages"], s["last_subject"]) for s in scopes] == [
        ("second", 2, "three"),
        ("first", 1, "one"),
    ]
    assert [s["scope"] for s in inbox.get("/_inbox/scopes?limit=1").json["scopes"]] == ["second"]
