"""The /_inbox HTTP API (SPEC §8): its server in process, mail through the real SMTP sink."""

from __future__ import annotations

import json
import threading
import time
from contextlib import AbstractContextManager
from http.client import HTTPResponse
from typing import Any
from urllib.request import urlopen

import psycopg
import pytest
from werkzeug.serving import make_server

from authsvc.accounts.passwords import Passwords
from authsvc.inbox.server import InboxServer
from authsvc.inbox.waiters import AsyncScopeWatcher
from authsvc.testing import InboxError, ScopedInbox
from testkit.servers import serve_in_thread
from tests.inbox_support import (
    HttpClient,
    email,
    inbox_services,
    running_sink,
    send,
    serving_inbox,
)


@pytest.fixture
def serve(sink, env, pool, passwords: Passwords):
    """Start the inbox's HTTP server with these settings (as `authsvc inbox --http-port`)."""

    def start(**settings: str) -> AbstractContextManager[str]:
        svc = inbox_services({**env, **settings}, pool, passwords)
        return serving_inbox(sink, svc, listen_url=env["AUTHSVC_DIRECT_DATABASE_URL"])

    return start


def new_scope(inbox: HttpClient) -> str:
    response = inbox.post("/_inbox/scopes")
    assert response.status_code == 201
    return str(response.json["scope"])


def test_new_scope_is_fresh_and_unguessable(inbox):
    first = inbox.post("/_inbox/scopes").json
    second = inbox.post("/_inbox/scopes").json
    assert first["scope"] != second["scope"]
    assert len(first["scope"]) >= 32
    assert first["address"] == f"{first['scope']}@inbox.test"


def test_expect_one_returns_the_single_message(inbox, sink):
    scope = new_scope(inbox)
    html = '<p><a href="https://app.example/verify?token=abc&amp;x=1">Confirm</a></p>'
    send(sink.port, email(f"alice+{scope}@inbox.test", html=html, message_id="<authsvc-job-1@x>"))
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=5&settle=0.2")
    assert response.status_code == 200
    message = response.json["message"]
    assert message["scope"] == scope
    assert message["to"] == [f"alice+{scope}@inbox.test"]
    assert message["from"] == "authsvc <no-reply@localhost>"
    assert message["subject"] == "Confirm your email"
    assert message["message_id"] == "<authsvc-job-1@x>"
    assert "https://app.example/verify?token=abc" in message["text"]
    assert "Confirm</a>" in message["html"]
    assert message["links"] == [
        "https://app.example/verify?token=abc",
        "https://app.example/verify?token=abc&x=1",
    ]
    again = inbox.get(f"/_inbox/scopes/{scope}/messages/{message['id']}")
    assert again.status_code == 200 and again.json["message"] == message


def test_expect_one_409_groups_resends_of_one_job(inbox, sink):
    scope = new_scope(inbox)
    for _ in range(2):  # the same job sent twice carries the same Message-ID
        send(sink.port, email(f"{scope}@inbox.test", message_id="<authsvc-job-7@localhost>"))
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=5&settle=0.5")
    assert response.status_code == 409
    body = response.json
    assert body["count"] == 2
    ids = [m["id"] for m in body["messages"]]
    assert body["duplicates"] == [ids]


def test_expect_one_409_for_two_distinct_emails(inbox, sink):
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="one", message_id="<authsvc-job-1@h>"))
    send(sink.port, email(f"{scope}@inbox.test", subject="two", message_id="<authsvc-job-2@h>"))
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=5&settle=0.5")
    assert response.status_code == 409
    assert response.json["count"] == 2
    assert [m["subject"] for m in response.json["messages"]] == ["one", "two"]
    assert response.json["duplicates"] == []


def test_expect_one_408_when_nothing_arrives(inbox, sink):
    scope = new_scope(inbox)
    started = time.monotonic()
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=0.5&settle=0")
    assert response.status_code == 408
    assert response.json["count"] == 0 and response.json["code"] == "no_message"
    assert 0.5 <= time.monotonic() - started < 3


def test_expect_one_settle_catches_a_second_email_arriving_late(inbox, sink):
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="first"))
    late = threading.Timer(0.3, send, (sink.port, email(f"{scope}@inbox.test", subject="late")))
    late.start()
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=5&settle=3")
    late.join()
    assert response.status_code == 409 and response.json["count"] == 2


def test_since_only_counts_newer_messages(inbox, sink):
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="verify"))
    first = inbox.get(f"/_inbox/scopes/{scope}/expect-one?settle=0").json["message"]
    send(sink.port, email(f"{scope}@inbox.test", subject="reset"))
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?settle=0&since={first['id']}")
    assert response.status_code == 200
    assert response.json["message"]["subject"] == "reset"
    listed = inbox.get(f"/_inbox/scopes/{scope}/messages?since={first['id']}").json["messages"]
    assert [m["subject"] for m in listed] == ["reset"]


def test_long_poll_wakes_on_arrival_not_at_the_deadline(inbox, sink):
    scope = new_scope(inbox)
    threading.Timer(0.5, send, (sink.port, email(f"{scope}@inbox.test"))).start()
    started = time.monotonic()
    response = inbox.get(f"/_inbox/scopes/{scope}/messages?wait=20&min=1")
    elapsed = time.monotonic() - started
    assert len(response.json["messages"]) == 1
    assert elapsed < 5, f"the wait ended after {elapsed:.1f} s instead of on arrival"


def test_list_waits_for_min_messages_oldest_first(inbox, sink):
    scope = new_scope(inbox)

    def send_in_order() -> None:  # one thread: timers' threads may run in any order
        for n in range(3):
            time.sleep(0.2)  # spread out, so the poll sees one and two before the third
            send(sink.port, email(f"{scope}@inbox.test", subject=f"m{n}"))

    threading.Thread(target=send_in_order).start()
    listed = inbox.get(f"/_inbox/scopes/{scope}/messages?wait=10&min=3").json["messages"]
    assert [m["subject"] for m in listed] == ["m0", "m1", "m2"]
    assert [m["id"] for m in listed] == sorted(m["id"] for m in listed)


def test_scopes_are_case_insensitive_and_separate(inbox, sink):
    send(sink.port, email("Bob+RUN42@Inbox.Test"))
    send(sink.port, email("other@inbox.test"))
    listed = inbox.get("/_inbox/scopes/Run42/messages").json["messages"]
    assert len(listed) == 1 and listed[0]["scope"] == "run42"
    assert listed[0]["to"] == ["Bob+RUN42@Inbox.Test"]


def test_non_ascii_scope_is_reachable_over_http(inbox, sink):
    send(sink.port, email("jörg+läuft@inbox.test"))
    listed = inbox.get("/_inbox/scopes/L%C3%84UFT/messages").json["messages"]
    assert [m["to"] for m in listed] == [["jörg+läuft@inbox.test"]]


def test_delete_empties_the_scope_and_later_mail_still_lands(inbox, sink):
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="before"))
    assert len(inbox.get(f"/_inbox/scopes/{scope}/messages").json["messages"]) == 1
    assert inbox.delete(f"/_inbox/scopes/{scope}").status_code == 204
    assert inbox.get(f"/_inbox/scopes/{scope}/messages").json["messages"] == []
    send(sink.port, email(f"{scope}@inbox.test", subject="after"))
    response = inbox.get(f"/_inbox/scopes/{scope}/expect-one?settle=0")
    assert response.json["message"]["subject"] == "after"


def test_raw_message_is_kept_byte_for_byte(inbox, sink):
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="raw"))
    message = inbox.get(f"/_inbox/scopes/{scope}/expect-one?settle=0").json["message"]
    raw = inbox.get(f"/_inbox/scopes/{scope}/messages/{message['id']}/raw")
    assert raw.status_code == 200 and raw.mimetype == "message/rfc822"
    assert b"Subject: raw" in raw.data


def test_messages_older_than_a_day_are_hidden_and_pruned(inbox, sink, pool, conn):
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="old"))
    [(old_id,)] = conn.execute("SELECT id FROM inbox_messages").fetchall()
    conn.execute("UPDATE inbox_messages SET received_at = now() - interval '25 hours'")
    send(sink.port, email(f"{scope}@inbox.test", subject="new"))
    listed = inbox.get(f"/_inbox/scopes/{scope}/messages").json["messages"]
    assert [m["subject"] for m in listed] == ["new"]
    for path in (f"messages/{old_id}", f"messages/{old_id}/raw"):
        response = inbox.get(f"/_inbox/scopes/{scope}/{path}")
        assert response.status_code == 404, path
        assert response.json["code"] == "not_found"
    with running_sink(pool):  # a sink prunes when it starts (and every few minutes after)
        pass
    subjects = conn.execute(
        "SELECT subject FROM inbox_messages AS m JOIN inbox_contents AS c ON c.id = m.content_id"
        " WHERE scope = %s", (scope,)
    )
    assert subjects.fetchall() == [("new",)]


@pytest.mark.parametrize(
    "query",
    [
        "messages?wait=31",
        "messages?wait=abc",
        "messages?wait=-1",
        "messages?wait=nan",
        "messages?min=x",
        "messages?since=1.5",
        "messages?since=99999999999999999999",
        "expect-one?timeout=1e3",
        "expect-one?settle=11",
        "expect-one?since=-2",
    ],
)
def test_bad_parameters_are_400_problems(inbox, query):
    response = inbox.get(f"/_inbox/scopes/abc/{query}")
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == "invalid_request"


@pytest.mark.parametrize("scope", ["a%20b", "x" * 65, "a+b", "%C3%A9%00", "a%40b"])
def test_bad_scope_names_are_400_problems(inbox, scope):
    for response in (
        inbox.get(f"/_inbox/scopes/{scope}/messages"),
        inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=0"),
        inbox.delete(f"/_inbox/scopes/{scope}"),
    ):
        assert response.status_code == 400, response.data
        assert response.json["code"] == "invalid_request"


def test_unknown_message_is_404(inbox):
    response = inbox.get("/_inbox/scopes/abc/messages/123456")
    assert response.status_code == 404 and response.json["code"] == "not_found"


def test_bearer_token_is_required_when_configured(serve):
    with serve(AUTHSVC_TEST_INBOX_TOKEN="s3cret") as url:
        client = HttpClient(url)
        assert client.post("/_inbox/scopes").status_code == 401
        wrong = client.post("/_inbox/scopes", headers={"Authorization": "Bearer s3cres"})
        assert wrong.status_code == 401
        assert wrong.headers["WWW-Authenticate"].startswith("Bearer")
        right = client.post("/_inbox/scopes", headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 201


def test_the_web_app_serves_no_inbox_even_with_the_inbox_on(app_with):
    """`authsvc inbox --http-port` is the one server of /_inbox; gunicorn's app has none."""
    client = app_with(AUTHSVC_TEST_INBOX="on").test_client()
    assert client.post("/_inbox/scopes").status_code == 404
    assert client.get("/_inbox/scopes/abc/messages").status_code == 404


def test_requests_with_nothing_to_wait_for_never_park(inbox, sink, monkeypatch):
    parked: list[float] = []
    park = AsyncScopeWatcher._park

    def recording(self, news, seconds):  # type: ignore[no-untyped-def]
        parked.append(seconds)
        return park(self, news, seconds)

    monkeypatch.setattr(AsyncScopeWatcher, "_park", recording)
    scope = new_scope(inbox)
    send(sink.port, email(f"{scope}@inbox.test", subject="there"))
    assert inbox.get(f"/_inbox/scopes/{scope}/messages").json["messages"] != []  # wait=0
    assert inbox.get("/_inbox/scopes/empty/messages?wait=0").json["messages"] == []
    assert inbox.get(f"/_inbox/scopes/{scope}/messages?wait=5").status_code == 200  # already met
    assert inbox.get("/_inbox/scopes/empty/expect-one?timeout=0&settle=0").status_code == 408
    assert parked == [], "a request with nothing to wait for was parked"


def test_scoped_inbox_says_the_inbox_may_be_off_on_a_non_json_answer(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)  # the inbox is off in `app`
    thread = serve_in_thread(server)
    try:
        client = ScopedInbox(f"http://127.0.0.1:{server.server_port}")
        with pytest.raises(InboxError, match=r"answered 404 .*is AUTHSVC_TEST_INBOX on\?"):
            client.new_scope()
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/_inbox/ui", 404, "not_found"),
        ("GET", "/_inbox/nope", 404, "not_found"),
        ("GET", "/_inbox/scopes/abc/messages/not-a-number", 404, "not_found"),
        ("POST", "/_inbox/scopes/abc/messages", 405, "method_not_allowed"),
        ("PUT", "/_inbox/scopes", 405, "method_not_allowed"),
    ],
)
def test_unknown_paths_and_wrong_methods_are_problems(inbox, method, path, status, code):
    response = inbox.open(path, method=method)
    assert response.status_code == status
    assert response.mimetype == "application/problem+json"
    assert response.json["code"] == code and response.json["status"] == status
    if status == 405:
        assert "GET" in response.headers["Allow"] or "POST" in response.headers["Allow"]


def test_routing_problems_under_the_inbox_still_need_the_token(serve):
    with serve(AUTHSVC_TEST_INBOX_TOKEN="s3cret") as url:
        client = HttpClient(url)
        assert client.get("/_inbox/nope").status_code == 401
        found = client.get("/_inbox/nope", headers={"Authorization": "Bearer s3cret"})
        assert found.status_code == 404 and found.json["code"] == "not_found"
        assert client.get("/_inboxes").mimetype != "application/problem+json"  # not ours


def test_a_dotted_capital_i_scope_is_reachable_over_http(inbox, sink):
    send(sink.port, email("x@inbox.test"), ["İ@inbox.test"])
    listed = inbox.get("/_inbox/scopes/%C4%B0/messages").json["messages"]
    assert [m["to"] for m in listed] == [["İ@inbox.test"]]


def test_inbox_answers_are_never_cached(inbox, sink):
    """Messages carry live links and scope names are capabilities: no cache keeps them."""
    created = inbox.post("/_inbox/scopes")
    assert created.headers.get("Cache-Control") == "no-store"
    scope = created.json["scope"]
    send(sink.port, email(f"{scope}@inbox.test", subject="not for caches"))
    listed = inbox.get(f"/_inbox/scopes/{scope}/messages?wait=10")
    message_id = listed.json["messages"][0]["id"]
    answers = [
        listed,
        inbox.get(f"/_inbox/scopes/{scope}/expect-one?timeout=10&settle=0"),
        inbox.get("/_inbox/scopes/nothing-here/expect-one?timeout=0&settle=0"),  # 408
        inbox.get("/_inbox/scopes/bad%20scope/messages"),  # 400
        inbox.get("/_inbox/scopes"),
        inbox.get(f"/_inbox/scopes/{scope}/messages/{message_id}"),
    ]
    assert [a.status_code for a in answers] == [200, 200, 408, 400, 200, 200]
    assert [a.headers.get("Cache-Control") for a in answers] == ["no-store"] * len(answers)


@pytest.mark.parametrize("name", ["q", "to", "subject"])
def test_a_nul_or_broken_utf8_in_a_filter_is_a_400(inbox, name):
    for value in ("%00", "a%00b"):
        for path in (
            f"/_inbox/scopes/abc/messages?{name}={value}",
            f"/_inbox/scopes/abc/expect-one?timeout=0&settle=0&{name}={value}",
        ):
            answer = inbox.get(path)
            assert answer.status_code == 400, (path, answer.status_code)
            assert answer.json["code"] == "invalid_request"
    assert inbox.get(f"/_inbox/scopes/abc/messages?{name}=%FF%ED%A0%80").status_code < 500


def test_the_slash_redirect_names_no_host(inbox):
    """`/_inbox` → `/_inbox/` by path alone: a forged Host header goes nowhere."""
    answer = inbox.get("/_inbox?x=1", headers={"Host": "evil.example"})
    assert answer.status_code == 308
    assert answer.headers["Location"] == "/_inbox/?x=1"


def _next_scopes(stream: HTTPResponse) -> list[str]:
    """The scope names of the event stream's next `scopes` event."""
    data = None
    while True:
        line = stream.readline().decode()
        assert line, "the stream ended"
        line = line.rstrip("\n")
        if line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "" and data is not None:
            return [s["scope"] for s in data["scopes"]]


def test_the_event_stream_ends_on_a_database_error_so_eventsource_reconnects(
    inbox, sink, monkeypatch
):
    """Once the stream has begun no 503 can be sent: it must end, not fall silent."""
    real = InboxServer._db
    calls = 0

    async def failing_after_the_first(self: InboxServer, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise psycopg.OperationalError("the database went away")
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(InboxServer, "_db", failing_after_the_first)
    with urlopen(f"{inbox.url}/_inbox/events", timeout=5) as stream:  # noqa: S310
        assert _next_scopes(stream) == []
        send(sink.port, email("gone@inbox.test"))  # news: the stream lists again, and fails
        started = time.monotonic()
        assert stream.read() == b""  # EOF; a silent open stream times out here instead
        assert time.monotonic() - started < 4
    assert calls == 2


def test_the_event_stream_is_live_without_listen(sink, env, pool, passwords):
    """With no direct URL to LISTEN on, the stream polls as the long polls do."""
    svc = inbox_services(env, pool, passwords)
    with serving_inbox(sink, svc, listen_url=None) as url, \
            urlopen(f"{url}/_inbox/events", timeout=10) as stream:  # noqa: S310
        assert _next_scopes(stream) == []
        send(sink.port, email("polled@inbox.test", subject="now"))
        started = time.monotonic()
        assert _next_scopes(stream) == ["polled"]
        assert time.monotonic() - started < 5
