"""The asyncio front answers the long polls exactly as the Flask views do, and proxies the rest.

The API tests of tests/test_inbox_api.py that wait (wait/min/since, expect-one,
settle, validation) run again here against a real front: a sink, its event
loop serving the front, and the Flask app behind it under a real WSGI server.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest
from psycopg_pool import ConnectionPool
from werkzeug.serving import make_server

from authsvc.clock import Clock, system_clock
from authsvc.config import load_settings
from authsvc.flask_app import create_app
from authsvc.inbox.front import FrontConfig, InboxFront
from authsvc.inbox.smtp import InboxSink
from authsvc.passwords import Passwords
from authsvc.testing import ScopedInbox
from testkit.waiting import free_port, wait_until
from tests.inbox_support import email, send
from tests.test_inbox_api import (  # noqa: F401 - collected again, against the front
    test_a_nul_or_broken_utf8_in_a_filter_is_a_400,
    test_bad_parameters_are_400_problems,
    test_bad_scope_names_are_400_problems,
    test_delete_empties_the_scope_and_later_mail_still_lands,
    test_expect_one_408_when_nothing_arrives,
    test_expect_one_409_for_two_distinct_emails,
    test_expect_one_409_groups_resends_of_one_job,
    test_expect_one_returns_the_single_message,
    test_expect_one_settle_catches_a_second_email_arriving_late,
    test_inbox_answers_are_never_cached,
    test_list_waits_for_min_messages_oldest_first,
    test_long_poll_wakes_on_arrival_not_at_the_deadline,
    test_non_ascii_scope_is_reachable_over_http,
    test_raw_message_is_kept_byte_for_byte,
    test_scopes_are_case_insensitive_and_separate,
    test_since_only_counts_newer_messages,
)


@dataclass
class Answer:
    status_code: int
    headers: Any
    data: bytes
    mimetype: str = field(init=False)

    def __post_init__(self) -> None:
        self.mimetype = (self.headers.get("Content-Type") or "").split(";")[0]

    @property
    def json(self) -> Any:
        return json.loads(self.data)


class HttpClient:
    """Just enough of Flask's test client, over real HTTP."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url, self.token = url, token

    def open(self, path: str, method: str = "GET") -> Answer:
        request = Request(self.url + path, method=method)  # noqa: S310 - our own server
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urlopen(request, timeout=40) as response:  # noqa: S310
                return Answer(response.status, response.headers, response.read())
        except HTTPError as exc:
            return Answer(exc.code, exc.headers, exc.read())

    def get(self, path: str) -> Answer:
        return self.open(path)

    def post(self, path: str) -> Answer:
        return self.open(path, "POST")

    def delete(self, path: str) -> Answer:
        return self.open(path, "DELETE")


def serve_front(
    sink: InboxSink, env: dict[str, str], pool: ConnectionPool, passwords: Passwords,
    database_url: str, clock: Clock = system_clock, **settings: str,
) -> Iterator[str]:
    """The Flask app under a real WSGI server, and the front before it on the sink's loop."""
    app = create_app(
        load_settings({**env, "AUTHSVC_TEST_INBOX": "on", **settings}), pool=pool,
        passwords=passwords, clock=clock,
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = FrontConfig(
        upstream=f"http://127.0.0.1:{server.server_port}", database_url=database_url,
        token=settings.get("AUTHSVC_TEST_INBOX_TOKEN"), port=free_port(),
        listen_url=env["AUTHSVC_DIRECT_DATABASE_URL"],
    )
    front = InboxFront(config)
    asyncio.run_coroutine_threadsafe(front.start(), sink.loop).result(timeout=20)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        asyncio.run_coroutine_threadsafe(front.stop(), sink.loop).result(timeout=20)
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture
def front_url(sink, env, pool, passwords, database_url) -> Iterator[str]:
    yield from serve_front(sink, env, pool, passwords, database_url)


@pytest.fixture
def inbox(front_url: str) -> HttpClient:
    return HttpClient(front_url)


def test_waiting_requests_are_parked_on_the_front_not_on_a_thread(front_url, sink):
    client = HttpClient(front_url)
    scope = client.post("/_inbox/scopes").json["scope"]  # proxied to the Flask app
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
    wait_until(lambda: client.get("/_inbox/front").json["waiting"] == 40, what="40 parked polls")
    # 40 is far more than the Flask app's cap of 8 waiters; the server grew no thread.
    assert threading.active_count() <= threads_before + 40  # only our own pollers
    send(sink.port, email(f"{scope}@inbox.test", subject="wake"))
    for poller in pollers:
        poller.join(timeout=20)
    assert [a.status_code for a in answers] == [200] * 40
    assert all(a.json["messages"][0]["subject"] == "wake" for a in answers)


def test_other_requests_pass_through_the_proxy_unchanged(front_url):
    client = HttpClient(front_url)
    page = client.get("/signup")
    assert page.status_code == 200 and b"<form" in page.data
    assert "session=" in page.headers["Set-Cookie"]
    assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
    missing = client.get("/_inbox/nope")
    assert missing.status_code == 404 and missing.json["code"] == "not_found"
    assert client.open("/_inbox/scopes", "PUT").status_code == 405


def test_the_front_requires_the_bearer_token_when_one_is_set(
    sink, env, pool, passwords, database_url
):
    for url in serve_front(
        sink, env, pool, passwords, database_url, AUTHSVC_TEST_INBOX_TOKEN="s3cret"
    ):
        anonymous = HttpClient(url)
        refused = anonymous.get("/_inbox/scopes/abc/expect-one?timeout=0")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert anonymous.post("/_inbox/scopes").status_code == 401  # the app behind says so too
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
