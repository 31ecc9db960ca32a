"""The inbox server in front of the web app, as `authsvc dev` runs it.

It serves /_inbox itself (a long poll is a parked coroutine, not a thread)
and forwards every other path to the Flask app behind it untouched.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from urllib.request import Request, urlopen

import pytest
from flask import Flask, request
from werkzeug.serving import make_server

from authsvc.inbox.server import DEFAULT_POOL_SIZE
from authsvc.testing import ScopedInbox
from testkit.servers import serve_in_thread
from testkit.waiting import wait_until
from tests.inbox_support import (
    Answer,
    HttpClient,
    email,
    inbox_services,
    send,
    serve_front,
    serving_inbox,
)


@pytest.fixture
def front_url(sink, env, pool, passwords) -> Iterator[str]:
    yield from serve_front(sink, env, pool, passwords)


def test_waiting_requests_are_parked_not_held_on_a_thread(front_url, sink):
    client = HttpClient(front_url)
    scope = client.post("/_inbox/scopes").json["scope"]
    threads_before = threading.active_count()
    answers: list[Answer] = []
    pollers = [
        threading.Thread(
            target=lambda: answers.append(
                client.get(f"/_inbox/scopes/{scope}/messages?wait=20&min=1")
            )
        )
        for _ in range(40)
    ]
    for poller in pollers:
        poller.start()
    wait_until(lambda: client.get("/_inbox/waiting").json["waiting"] == 40,
               what="40 parked polls")
    # Our own pollers are new, and the server's fixed pool of query threads;
    # nothing per parked poll.
    assert threading.active_count() <= threads_before + 40 + DEFAULT_POOL_SIZE
    send(sink.port, email(f"{scope}@inbox.test", subject="wake"))
    for poller in pollers:
        poller.join(timeout=20)
    assert [a.status_code for a in answers] == [200] * 40
    assert all(a.json["messages"][0]["subject"] == "wake" for a in answers)


def test_other_paths_are_forwarded_unchanged_and_the_inbox_is_answered_here(front_url):
    client = HttpClient(front_url)
    page = client.get("/signup")
    assert page.status_code == 200 and b"<form" in page.data
    assert "session=" in page.headers["Set-Cookie"]
    assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
    missing = client.get("/_inbox/nope")
    assert missing.status_code == 404 and missing.json["code"] == "not_found"
    assert client.open("/_inbox/scopes", "PUT").status_code == 405
    api = client.get("/api/v1/nope")
    assert api.status_code == 404 and api.mimetype == "application/problem+json"
    assert client.get("/_inboxes").mimetype == "text/html"  # not the inbox's: the app's page


def test_the_bearer_token_guards_every_inbox_path_and_nothing_else(sink, env, pool, passwords):
    for url in serve_front(sink, env, pool, passwords, AUTHSVC_TEST_INBOX_TOKEN="s3cret"):
        anonymous = HttpClient(url)
        refused = anonymous.get("/_inbox/scopes/abc/expect-one?timeout=0")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert anonymous.post("/_inbox/scopes").status_code == 401
        assert anonymous.get("/_inbox/").status_code == 401
        assert anonymous.get("/signup").status_code == 200  # the app's pages need no token
        allowed = HttpClient(url, token="s3cret")
        assert allowed.get("/_inbox/scopes/abc/expect-one?timeout=0").status_code == 408
        inbox = ScopedInbox(url, token="s3cret")
        inbox.new_scope()
        send(sink.port, email(inbox.address("qa"), subject="hello"))
        assert inbox.expect_one(settle=0).subject == "hello"


def test_events_stream_the_scope_list_when_mail_lands(front_url, sink):
    request = Request(f"{front_url}/_inbox/events")  # noqa: S310
    with urlopen(request, timeout=20) as stream:  # noqa: S310
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert stream.headers["Cache-Control"] == "no-store"

        def next_scopes() -> list[str]:
            data = None
            while True:
                line = stream.readline().decode().rstrip("\n")
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "" and data is not None:
                    return [s["scope"] for s in data["scopes"]]

        assert next_scopes() == []
        send(sink.port, email("live@inbox.test", subject="now"))
        assert next_scopes() == ["live"]


def _echo_app() -> Flask:
    """An upstream that answers with the request target and headers as it received them."""
    echo = Flask("echo")

    @echo.route("/", defaults={"path": ""})
    @echo.route("/<path:path>")
    def everything(path: str) -> dict[str, object]:
        return {
            "target": request.environ["REQUEST_URI"],
            # The WSGI server joins repeated headers with a comma.
            "forwarded_for": request.environ.get("HTTP_X_FORWARDED_FOR"),
        }

    return echo


@pytest.fixture
def echo_front(sink, env, pool, passwords) -> Iterator[HttpClient]:
    server = make_server("127.0.0.1", 0, _echo_app(), threaded=True)
    thread = serve_in_thread(server)
    try:
        svc = inbox_services(env, pool, passwords)
        upstream = f"http://127.0.0.1:{server.server_port}"
        with serving_inbox(sink, svc, listen_url=None, upstream=upstream) as url:
            yield HttpClient(url)
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


@pytest.mark.parametrize(
    "target",
    ["/p?x=%2F", "/p?x=%7E&y=%7e", "/p?x=%zz", "/a/../b", "/a/./b", "/a%2Fb/%7E?q=a+b%20c",
     "/p?x=%41"],
)
def test_the_request_target_reaches_the_app_byte_for_byte(echo_front, target):
    answer = echo_front.get(target)
    assert answer.status_code == 200
    assert answer.json["target"] == target


def test_x_forwarded_for_is_sent_once_with_the_peer_appended(echo_front):
    assert echo_front.get("/p").json["forwarded_for"] == "127.0.0.1"
    chained = echo_front.get("/p", headers={"X-Forwarded-For": "203.0.113.7"})
    assert chained.json["forwarded_for"] == "203.0.113.7, 127.0.0.1"
