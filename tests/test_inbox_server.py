"""The test inbox under real gunicorn (gthread), and the ScopedInbox client against it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.request import urlopen

import psycopg
import pytest

from authsvc.cli.serve import gunicorn_argv
from authsvc.db import create_pool
from authsvc.inbox.smtp import InboxSink
from authsvc.testing import InboxError, ScopedInbox
from tests.conftest import TEST_KEY
from tests.inbox_support import email, free_port, running_sink, send, wait_for
from tests.pg import TestDatabases

pytestmark = pytest.mark.e2e


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
        "AUTHSVC_DATA_DIR": str(tmp_path_factory.mktemp("data")),
        "AUTHSVC_SECRET_KEYS": TEST_KEY,
        "AUTHSVC_TEST_INBOX": "on",
    }
    web = subprocess.Popen(
        gunicorn_argv(f"127.0.0.1:{port}", workers=1, threads=8), env=env,
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

        wait_for(up, timeout=30, what="gunicorn to answer")
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
    with psycopg.connect(server.database_url, autocommit=True) as conn:
        def listening() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN authsvc_inbox%'"
            ).fetchone()
            return bool(row and row[0])

        wait_for(listening, timeout=10, what="the long polls to be waiting")
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
