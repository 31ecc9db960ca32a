"""Search across every scope (SPEC §16): the query language, paging, bounds and bad input."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from authsvc.inbox import link_states, search
from authsvc.inbox.params import BadRequest
from authsvc.inbox.server import DEFAULT_POOL_SIZE
from testkit.waiting import wait_until
from tests.inbox_support import Answer, HttpClient, email, inbox_services, send, serving_inbox


def _search(inbox: HttpClient, q: str, **more: object) -> dict:
    query = "&".join([f"q={quote(q)}", *(f"{k}={v}" for k, v in more.items())])
    answer = inbox.get(f"/_inbox/search?{query}")
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.json


def _subjects(found: dict) -> list[str]:
    return [m["subject"] for m in found["messages"]]


@pytest.fixture
def mail(sink) -> None:
    send(sink.port, email("alice+s1@inbox.test", subject="Confirm your email",
                          text="Welcome aboard. Your code is 482910."))
    send(sink.port, email("bob+s2@inbox.test", subject="Reset your password",
                          text="Reset here: http://127.0.0.1:8000/reset?token=x"))
    send(sink.port, email("carol+s2@inbox.test", subject="100% off_today",
                          sender="Shop <deals@shop.example>", text="Big sale"))
    send(sink.port, email("dave+s3@inbox.test", subject="100 apples today",
                          sender="Farm <news@farm.example>", text="Apples"))


def test_each_term_narrows_across_every_scope_newest_first(inbox, mail):
    assert _subjects(_search(inbox, "")) == [
        "100 apples today", "100% off_today", "Reset your password", "Confirm your email",
    ]
    assert _subjects(_search(inbox, "to:bob")) == ["Reset your password"]
    assert _subjects(_search(inbox, "to:+s2@")) == ["100% off_today", "Reset your password"]
    assert _subjects(_search(inbox, "from:shop.example")) == ["100% off_today"]
    assert _subjects(_search(inbox, 'subject:"your PASSWORD"')) == ["Reset your password"]
    assert _subjects(_search(inbox, "welcome")) == ["Confirm your email"]  # the text part
    assert _subjects(_search(inbox, "s3")) == ["100 apples today"]  # a scope
    assert _subjects(_search(inbox, "your to:alice")) == ["Confirm your email"]  # all terms
    assert _subjects(_search(inbox, "nothing-like-this")) == []


def test_percent_and_underscore_match_themselves(inbox, mail):
    assert _subjects(_search(inbox, "subject:100%")) == ["100% off_today"]
    assert _subjects(_search(inbox, "off_today")) == ["100% off_today"]
    assert _subjects(_search(inbox, "_")) == ["100% off_today"]
    assert _subjects(_search(inbox, "%")) == ["100% off_today"]
    assert _subjects(_search(inbox, "\\")) == []


def test_after_and_before_bound_the_time_received(inbox, mail):
    now = datetime.now(UTC)
    today, tomorrow = now.date().isoformat(), (now + timedelta(days=1)).date().isoformat()
    assert len(_search(inbox, f"after:{today}")["messages"]) == 4
    assert _search(inbox, f"after:{tomorrow}")["messages"] == []
    assert _search(inbox, f"before:{today}")["messages"] == []
    in_a_minute = (now + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert len(_search(inbox, f"before:{in_a_minute} to:dave")["messages"]) == 1


def test_results_page_by_older_than_and_carry_code_and_link_states(inbox, mail):
    first = _search(inbox, "", limit=3)
    assert len(first["messages"]) == 3 and first["more"] is True
    assert first["next_older_than"] == first["messages"][-1]["id"]
    rest = _search(inbox, "", limit=3, older_than=first["next_older_than"])
    assert _subjects(rest) == ["Confirm your email"] and rest["more"] is False
    assert rest["next_older_than"] is None
    [confirm] = rest["messages"]
    assert confirm["code"] == "482910" and confirm["body_omitted"] is True
    [reset] = _search(inbox, "subject:reset")["messages"]
    assert reset["link_states"] == [
        {"url": "http://127.0.0.1:8000/reset?token=x", "purpose": None, "state": "invalid"},
    ]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("q=" + quote('subject:"reset'), "unclosed double quote"),
        ("q=" + quote("after:yesterday"), "after:yesterday is not a date"),
        ("q=" + quote("before:2026-13-45"), "before:2026-13-45 is not a date"),
        ("q=" + quote("to:"), "to: needs a value"),
        ("q=" + quote('from:""'), 'from:"" needs a value'),
        ("q=" + "x" * 501, "at most 500 characters"),
        ("q=" + quote("subject:" + "y" * 201), "longer than 200 characters"),
        ("q=" + quote(" ".join(["w"] * 21)), "more than 20 terms"),
        ("q=a%00b", "without NUL"),
        ("q=a%0Ab", "one line"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("older_than=-1", "older_than"),
        ("older_than=99999999999999999999", "older_than"),
    ],
)
def test_a_malformed_search_is_a_400_naming_the_term(inbox, query, names):
    answer = inbox.get(f"/_inbox/search?{query}")
    assert answer.status_code == 400
    assert answer.mimetype == "application/problem+json"
    assert answer.json["code"] == "invalid_request" and names in answer.json["detail"]


def test_a_search_past_its_time_bound_answers_503_search_timeout(inbox, monkeypatch):
    # A statement that outlasts the bound, ended by PostgreSQL's own statement_timeout.
    monkeypatch.setitem(search.Q, "search_messages", "SELECT pg_sleep(5)")
    monkeypatch.setattr(search, "TIMEOUT_MS", 50)
    answer = inbox.get("/_inbox/search?q=anything")
    assert answer.status_code == 503 and answer.json["code"] == "search_timeout"
    assert "narrow it" in answer.json["detail"]
    assert inbox.get("/_inbox/search?q=anything").status_code == 503  # and the pool is fine
    page = inbox.get("/_inbox/ui/search?q=" + quote('subject:"a b"'))
    assert page.status_code == 503 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert f'role="alert">{search.TIMEOUT_ADVICE}</p>' in html
    assert 'value="subject:&#34;a b&#34;"' in html  # the query stays in the box to narrow


HELD = 7_160_016  # the advisory lock the slow searches below wait on


def _waiting_on_the_lock(conn) -> int:
    row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                       " AND objid = %s AND NOT granted", (HELD,)).fetchone()
    return int(row[0])


def test_slow_searches_cannot_crowd_out_listings_and_expect_one(inbox, sink, env, monkeypatch):
    """As many slow searches as the server has pooled threads: a few run, the rest are
    told to retry, and a listing and an expect-one are still answered at once."""
    send(sink.port, email("ann+calm@inbox.test"))
    real = link_states.searched

    def slow(db: Any, *args: Any) -> Any:  # waits on a lock this test holds, then searches
        # A transaction's lock, so through a transaction pooler too it is taken and
        # let go on one server connection.
        db.execute("SELECT pg_advisory_xact_lock_shared(%s)", (HELD,))
        return real(db, *args)

    monkeypatch.setattr(link_states, "searched", slow)
    # The holder talks to the server itself: behind a pooler, a session's lock on a
    # pooled connection could be handed to the searches' own statements.
    conn = psycopg.connect(env["AUTHSVC_DIRECT_DATABASE_URL"], autocommit=True)
    conn.execute("SELECT pg_advisory_lock(%s)", (HELD,))
    searches = ThreadPoolExecutor(DEFAULT_POOL_SIZE)
    try:
        running = [searches.submit(inbox.get, "/_inbox/search?q=x")
                   for _ in range(DEFAULT_POOL_SIZE)]
        wait_until(lambda: _waiting_on_the_lock(conn) >= 2, what="searches held by the lock")
        for path in ("/_inbox/scopes/calm/messages", "/_inbox/scopes/calm/expect-one?settle=0",
                     "/_inbox/scopes"):
            began = time.monotonic()
            answer = inbox.open(path, timeout=10)
            assert answer.status_code == 200 and time.monotonic() - began < 2, path
        turned_away = wait_until(lambda: [f.result() for f in running if f.done()],
                                 what="the searches past the limit to be answered")
        page = inbox.get("/_inbox/ui/search?q=x")  # the UI's box, told the same
        assert page.status_code == 503 and page.headers["Retry-After"] == "1"
        assert search.BUSY_ADVICE in page.get_data(as_text=True)
        assert _waiting_on_the_lock(conn) == search.SLOTS
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (HELD,))
        answers: list[Answer] = [f.result() for f in running]
        searches.shutdown()
        conn.close()
    busy = [a for a in answers if a.status_code == 503]
    assert [a.status_code for a in answers].count(200) == search.SLOTS
    assert len(busy) == DEFAULT_POOL_SIZE - search.SLOTS and turned_away
    for answer in busy:
        assert answer.mimetype == "application/problem+json"
        assert answer.json["code"] == "search_busy" and answer.headers["Retry-After"] == "1"
    ui = inbox.get("/_inbox/ui/search?q=x")  # the slots are free again
    assert ui.status_code == 200


def test_search_needs_the_token_when_one_is_set(sink, env, pool, passwords):
    svc = inbox_services({**env, "AUTHSVC_TEST_INBOX_TOKEN": "s3cret"}, pool, passwords)
    with serving_inbox(sink, svc, listen_url=None) as url:
        assert HttpClient(url).get("/_inbox/search?q=x").status_code == 401
        assert HttpClient(url).get("/_inbox/ui/search?q=x").status_code == 401
        assert HttpClient(url, token="s3cret").get("/_inbox/search?q=x").status_code == 200


def test_the_search_page_shows_results_and_names_a_bad_term(inbox, mail):
    page = inbox.get("/_inbox/ui/search?q=" + quote("to:+s2@")).get_data(as_text=True)
    assert "Reset your password" in page and "100% off_today" in page
    assert "Confirm your email" not in page
    assert 'href="/_inbox/ui/scopes/s2/messages/' in page
    bad = inbox.get("/_inbox/ui/search?q=" + quote("after:soon"))
    assert bad.status_code == 400 and "after:soon is not a date" in bad.get_data(as_text=True)


def test_nothing_a_sender_writes_is_markup_in_search_results(inbox, sink):
    hostile = '<img src=x onerror="alert(1)">'
    send(sink.port, email("eve+xss@inbox.test", subject=f"Hi {hostile}",
                          sender=f'"{hostile}" <eve@evil.example>'))
    page = inbox.get("/_inbox/ui/search?q=" + quote("to:eve")).get_data(as_text=True)
    assert "<img" not in page and "Hi &lt;img src=x onerror=" in page


@given(st.text(max_size=120))
@settings(max_examples=300, deadline=None)
def test_any_query_is_read_or_refused_with_a_reason_never_an_error(raw):
    try:
        query = search.parse_query(raw)
    except BadRequest as exc:
        assert exc.detail  # a 400 that says why
        return
    for value in (*query.to, *query.sender, *query.subject, *query.words):
        assert value and "\n" not in value and "\x00" not in value
