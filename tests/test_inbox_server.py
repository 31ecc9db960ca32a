"""The test inbox under real gunicorn (gthread), and the ScopedInbox client against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.error import HTTPError
from urllib.request import urlopen

import pytest

from authsvc import testing
from authsvc.cli.serve import gunicorn_argv
from authsvc.db import connect, create_pool
from authsvc.inbox.smtp import InboxSink
from authsvc.inbox.thread_waiters import DEFAULT_MAX_WAITERS
from authsvc.testing import InboxError, ScopedInbox
from testkit.waiting import free_port, wait_until
from tests.conftest import TEST_KEY
from tests.inbox_support import email, running_sink, send
from tests.pg import TestDatabases

pytestmark = pytest.mark.e2e
THREADS = 16  # as under `authsvc dev`


@dataclass(frozen=True)
class Server:
    url: str
    database_url: str
    sink: InboxSink


def _get(url: str, timeout: float = 5.0) -> int:
    with urlopen(url, timeout=timeout) as response:  # noqa: S310
        return int(response.status)


@pytest.fixture(scope="module")
def server(test_databases: TestDatabases, tmp_path_factory) -> Iterator[Server]:
    database_url = test_databases.create()
    port = free_port()
    env = {
        **os.environ,
        "AUTHSVC_ENV": "test",
        "AUTHSVC_DATABASE_URL": database_url,
        "AUTHSVC_DIRECT_DATABASE_URL": test_databases.direct(database_url),
        "AUTHSVC_DATA_DIR": str(tmp_path_factory.mktemp("data")),
        "AUTHSVC_SECRET_KEYS": TEST_KEY,
        "AUTHSVC_TEST_INBOX": "on",
    }
    web = subprocess.Popen(
        gunicorn_argv(f"127.0.0.1:{port}", workers=1, threads=THREADS), env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    pool = create_pool(database_url, min_size=1, max_size=4)
    url = f"http://127.0.0.1:{port}"
    try:
        def up() -> bool:
            try:
                return _get(f"{url}/healthz", timeout=1) == 200
            except OSError:
                return False

        wait_until(up, timeout=30, what="gunicorn to answer")
        with running_sink(pool) as sink:
            yield Server(url, database_url, sink)
    finally:
        web.terminate()
        web.wait(timeout=15)
        pool.close()
        test_databases.drop(database_url)


def test_long_polls_do_not_block_other_requests(server: Server):
    inboxes = [ScopedInbox(server.url) for _ in range(6)]
    for inbox in inboxes:
        inbox.new_scope()
    results: dict[int, list] = {}

    def poll(n: int) -> None:
        started = time.monotonic()
        found = inboxes[n].messages(wait=20, at_least=1)
        results[n] = [found, time.monotonic() - started]

    pollers = [threading.Thread(target=poll, args=(n,)) for n in range(6)]
    for thread in pollers:
        thread.start()
    with connect(server.database_url) as conn:
        def listening() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN authsvc_inbox%'"
            ).fetchone()
            return bool(row and row[0])

        wait_until(listening, timeout=10, what="the long polls to be waiting")
    for _ in range(5):
        started = time.monotonic()
        assert _get(f"{server.url}/healthz") == 200
        assert time.monotonic() - started < 1.0
    assert all(t.is_alive() for t in pollers), "a long poll returned early"

    delivered = time.monotonic()
    for inbox in inboxes:
        send(server.sink.port, email(inbox.address("qa"), subject=f"for {inbox.scope}"))
    for thread in pollers:
        thread.join(timeout=25)
    assert time.monotonic() - delivered < 5, "the polls did not wake on arrival"
    for n, inbox in enumerate(inboxes):
        found, _elapsed = results[n]
        assert [m.subject for m in found] == [f"for {inbox.scope}"]


def _fetch(url: str, timeout: float = 40.0) -> tuple[int, dict[str, str], dict]:
    try:
        with urlopen(url, timeout=timeout) as response:  # noqa: S310
            return response.status, dict(response.headers), json.loads(response.read())
    except HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def _listeners(database_url: str) -> int:
    with connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN authsvc_inbox%'"
        ).fetchone()
        return int(row[0]) if row else 0


def test_more_long_polls_than_threads_get_503_and_leave_the_server_responsive(server: Server):
    polls = THREADS + 4
    assert DEFAULT_MAX_WAITERS < THREADS < polls
    shared = ScopedInbox(server.url)
    shared.new_scope()
    url = f"{server.url}/_inbox/scopes/{shared.scope}/messages?wait=30&min=1"
    results: list[tuple[int, dict[str, str], dict, float]] = []
    lock = threading.Lock()

    def poll() -> None:
        started = time.monotonic()
        status, headers, body = _fetch(url)
        with lock:
            results.append((status, headers, body, time.monotonic() - started))

    pollers = [threading.Thread(target=poll) for _ in range(polls)]
    for thread in pollers:
        thread.start()
    try:
        excess = polls - DEFAULT_MAX_WAITERS
        wait_until(lambda: len(results) >= excess, timeout=15,
                   what="the excess polls to be refused")
        wait_until(lambda: _listeners(server.database_url) > 0, what="the polls to be waiting")
        for status, headers, body, elapsed in results:
            assert status == 503 and body["code"] == "too_many_waiters", body
            assert headers["Content-Type"] == "application/problem+json"
            assert headers["Retry-After"] == "1"
            assert elapsed < 5
        for path in ("/healthz", f"/_inbox/scopes/{shared.scope}/messages"):
            started = time.monotonic()
            assert _fetch(f"{server.url}{path}", timeout=5)[0] == 200
            assert time.monotonic() - started < 1.0, f"{path} was starved"
        assert sum(t.is_alive() for t in pollers) == DEFAULT_MAX_WAITERS
    finally:
        send(server.sink.port, email(shared.address(), subject="wake up"))
        for thread in pollers:
            thread.join(timeout=35)
    answered = [body for status, _h, body, _e in results if status == 200]
    assert len(answered) == DEFAULT_MAX_WAITERS
    assert all([m["subject"] for m in body["messages"]] == ["wake up"] for body in answered)


def test_scoped_inbox_retries_while_every_waiting_slot_is_taken(server: Server, monkeypatch):
    shared = ScopedInbox(server.url)
    shared.new_scope()
    url = f"{server.url}/_inbox/scopes/{shared.scope}/messages?wait=30&min=1"
    def hold() -> None:
        # The probe below briefly takes a slot too; a holder refused meanwhile
        # tries again, so all of them end up waiting.
        while _fetch(url)[0] == 503:
            pass

    holders = [threading.Thread(target=hold) for _ in range(DEFAULT_MAX_WAITERS)]
    statuses: list[int] = []
    real_urlopen = testing.urlopen

    def recording_urlopen(request, timeout):  # type: ignore[no-untyped-def]
        try:
            response = real_urlopen(request, timeout=timeout)
        except HTTPError as exc:
            statuses.append(exc.code)
            raise
        statuses.append(response.status)
        return response

    monkeypatch.setattr(testing, "urlopen", recording_urlopen)
    probe = url.replace("wait=30", "wait=0.1").replace("min=1", "min=2")
    # Polls of an earlier test may still hold slots; start from a free server.
    wait_until(lambda: _fetch(probe)[0] == 200, timeout=40, what="every waiting slot to be free")
    for thread in holders:
        thread.start()
    inbox = ScopedInbox(server.url)
    inbox.new_scope()
    found: list = []
    try:
        # Every slot taken: a probe is refused, so the client's poll will be too.
        wait_until(lambda: _fetch(probe)[0] == 503, timeout=15, what="every waiting slot taken")
        client = threading.Thread(target=lambda: found.extend(inbox.messages(wait=20)))
        client.start()
        wait_until(lambda: 503 in statuses, timeout=10, what="the client to be refused once")
    finally:
        send(server.sink.port, email(shared.address(), subject="release"))
        for thread in holders:
            thread.join(timeout=35)
    send(server.sink.port, email(inbox.address(), subject="for the client"))
    client.join(timeout=30)
    assert [m.subject for m in found] == ["for the client"]
    assert statuses[-1] == 200


def test_scoped_inbox_expect_one_and_link(server: Server):
    inbox = ScopedInbox(server.url)
    inbox.new_scope()
    address = inbox.address("alice")
    assert address == f"alice+{inbox.scope}@inbox.test"
    send(server.sink.port, email(address, text="Verify: https://a.example/verify?token=one"))
    assert inbox.link(containing="token=") == "https://a.example/verify?token=one"
    # The client moves past what it returned: the next expect_one sees only new mail.
    send(server.sink.port, email(address, text="Reset: https://a.example/reset?token=two"))
    assert inbox.link(inbox.expect_one(settle=0.2)) == "https://a.example/reset?token=two"
    assert [m.id for m in inbox.messages()] == sorted(m.id for m in inbox.messages())
    assert len(inbox.messages()) == 2
    inbox.clear()
    assert inbox.messages() == []


def test_scoped_inbox_reports_duplicates_and_silence(server: Server):
    inbox = ScopedInbox(server.url)
    with pytest.raises(InboxError, match="no email arrived"):
        inbox.expect_one(timeout=0.3, settle=0)
    for _ in range(2):
        send(server.sink.port, email(inbox.address(), message_id="<authsvc-job-3@h>"))
    with pytest.raises(InboxError, match=r"got 2: .*re-sends of one job: \[\[\d+, \d+\]\]"):
        inbox.expect_one(settle=0.5)


def test_scoped_inbox_fixture_as_a_pytest_plugin(server: Server, tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["authsvc.testing"]\n')
    (tmp_path / "test_theirs.py").write_text(
        "import os, smtplib\n"
        "from email.message import EmailMessage\n"
        "def test_one_email(scoped_inbox):\n"
        "    message = EmailMessage()\n"
        "    message['From'], message['To'] = 'app@example.com', scoped_inbox.address('bo')\n"
        "    message['Subject'] = 'Welcome'\n"
        "    message.set_content('Confirm: https://their.app/confirm?token=t1')\n"
        "    port = int(os.environ['SINK_PORT'])\n"
        "    with smtplib.SMTP('127.0.0.1', port) as client:\n"
        "        client.send_message(message)\n"
        "    assert scoped_inbox.link(containing='token=').endswith('token=t1')\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "AUTHSVC_INBOX_URL": server.url, "SINK_PORT": str(server.sink.port)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
