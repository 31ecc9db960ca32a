"""`authsvc inbox --http-port` as a real process: the inbox's one HTTP server, alone.

Long polls park without holding anything the other requests need, and the
ScopedInbox client works against it as a test suite would use it.
"""

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

from authsvc.inbox.params import MAX_WAIT_SECONDS
from authsvc.inbox.server import DEFAULT_POOL_SIZE
from authsvc.testing import InboxError, ScopedInbox
from testkit.waiting import free_ports, wait_until
from tests.conftest import TEST_KEY
from tests.inbox_support import email, send
from tests.pg import TestDatabases

pytestmark = pytest.mark.e2e
AUTHSVC = [sys.executable, "-m", "authsvc.cli"]


@dataclass(frozen=True)
class Server:
    url: str
    database_url: str
    smtp_port: int


def _get(url: str, timeout: float = 5.0) -> int:
    try:
        with urlopen(url, timeout=timeout) as response:  # noqa: S310
            return int(response.status)
    except HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def server(test_databases: TestDatabases, tmp_path_factory) -> Iterator[Server]:
    database_url = test_databases.create()
    http_port, smtp_port = free_ports(2)
    env = {
        **os.environ,
        "AUTHSVC_ENV": "test",
        "AUTHSVC_DATABASE_URL": database_url,
        "AUTHSVC_DIRECT_DATABASE_URL": test_databases.direct(database_url),
        "AUTHSVC_DATA_DIR": str(tmp_path_factory.mktemp("data")),
        "AUTHSVC_SECRET_KEYS": TEST_KEY,
        "AUTHSVC_TEST_INBOX": "on",
    }
    inbox = subprocess.Popen(
        [*AUTHSVC, "inbox", "--port", str(smtp_port), "--http-port", str(http_port)], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{http_port}"
    try:
        def up() -> bool:
            assert inbox.poll() is None, "authsvc inbox exited"
            try:
                return _get(f"{url}/_inbox/openapi.json", timeout=1) == 200
            except OSError:
                return False

        wait_until(up, timeout=30, what="authsvc inbox to answer")
        yield Server(url, database_url, smtp_port)
    finally:
        inbox.terminate()
        assert inbox.wait(timeout=15) == 0
        test_databases.drop(database_url)


def test_alone_it_serves_only_the_inbox(server: Server):
    assert _get(f"{server.url}/_inbox/scopes") == 200
    assert _get(f"{server.url}/login") == 404
    assert _get(f"{server.url}/api/v1/signups") == 404


def test_long_polls_do_not_block_other_requests(server: Server):
    # More polls than the server has threads and pooled connections (DEFAULT_POOL_SIZE):
    # a server whose parked polls held one each would have none left for the listing.
    count = DEFAULT_POOL_SIZE + 2
    inboxes = [ScopedInbox(server.url) for _ in range(count)]
    for inbox in inboxes:
        inbox.new_scope()
    results: dict[int, list] = {}

    def poll(n: int) -> None:
        found = inboxes[n].messages(wait=MAX_WAIT_SECONDS, at_least=1)
        results[n] = found

    began = time.monotonic()
    pollers = [threading.Thread(target=poll, args=(n,)) for n in range(count)]
    for thread in pollers:
        thread.start()

    def parked() -> int:
        with urlopen(f"{server.url}/_inbox/waiting", timeout=5) as response:  # noqa: S310
            return int(json.load(response)["waiting"])

    wait_until(lambda: parked() == count, timeout=20, what=f"{count} long polls parked")
    for _ in range(5):
        started = time.monotonic()
        assert _get(f"{server.url}/_inbox/scopes") == 200
        # Seconds to spare on a busy machine; a server out of threads would answer
        # only when the polls do.
        assert time.monotonic() - started < 3.0
    assert all(t.is_alive() for t in pollers), "a long poll returned early"

    delivered = time.monotonic()
    assert delivered - began < MAX_WAIT_SECONDS - 10, "too slow to tell waking from the deadline"
    for inbox in inboxes:
        send(server.smtp_port, email(inbox.address("qa"), subject=f"for {inbox.scope}"))
    # Each poll answers on arrival: well before its own deadline, which a server that
    # only looked again at the end would wait for.
    for thread in pollers:
        thread.join(timeout=max(0.0, began + MAX_WAIT_SECONDS - 5 - time.monotonic()))
    assert not any(t.is_alive() for t in pollers), "the polls did not wake on arrival"
    for n, inbox in enumerate(inboxes):
        assert [m.subject for m in results[n]] == [f"for {inbox.scope}"]


def test_scoped_inbox_expect_one_and_link(server: Server):
    inbox = ScopedInbox(server.url)
    inbox.new_scope()
    address = inbox.address("alice")
    assert address == f"alice+{inbox.scope}@inbox.test"
    send(server.smtp_port, email(address, text="Verify: https://a.example/verify?token=one"))
    assert inbox.link(containing="token=") == "https://a.example/verify?token=one"
    # The client moves past what it returned: the next expect_one sees only new mail.
    send(server.smtp_port, email(address, text="Reset: https://a.example/reset?token=two"))
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
        send(server.smtp_port, email(inbox.address(), message_id="<authsvc-job-3@h>"))
    with pytest.raises(InboxError, match=r"got 2: .*re-sends of one job: \[\[\d+, \d+\]\]"):
        inbox.expect_one(settle=0.5)


_THEIR_TESTS = (
    "import os, smtplib\n"
    "from email.message import EmailMessage\n"
    "def _send(scoped_inbox, subject):\n"
    "    message = EmailMessage()\n"
    "    message['From'], message['To'] = 'app@example.com', scoped_inbox.address('bo')\n"
    "    message['Subject'] = subject\n"
    "    message.set_content('Confirm: https://their.app/confirm?token=t1')\n"
    "    with smtplib.SMTP('127.0.0.1', int(os.environ['SINK_PORT'])) as client:\n"
    "        client.send_message(message)\n"
    "    with open(os.environ['SCOPES_FILE'], 'a') as scopes:\n"
    "        scopes.write(scoped_inbox.scope + '\\n')\n"
    "def test_one_email(scoped_inbox):\n"
    "    _send(scoped_inbox, 'Welcome')\n"
    "    assert scoped_inbox.link(containing='token=').endswith('token=t1')\n"
    "def test_that_fails(scoped_inbox):\n"
    "    _send(scoped_inbox, 'Kept')\n"
    "    assert scoped_inbox.expect_one().subject == 'Something else'\n"
)


def _run_their_suite(server: Server, folder) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    scopes = folder / "scopes.txt"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={**os.environ, "AUTHSVC_INBOX_URL": server.url, "SINK_PORT": str(server.smtp_port),
             "SCOPES_FILE": str(scopes)},
    )
    return result, scopes.read_text().split()


def _count(server: Server, scope: str) -> int:
    return len(ScopedInbox(server.url)._request("GET", f"/scopes/{scope}/messages")[1]["messages"])


def test_the_fixture_loads_by_itself_and_keeps_a_failing_tests_scope(server: Server, tmp_path):
    """Installed, the plugin needs no conftest; a failing test's scope is kept and its UI
    address printed in the failure; a passing test's scope is emptied."""
    (tmp_path / "test_theirs.py").write_text(_THEIR_TESTS)
    result, (passed_scope, failed_scope) = _run_their_suite(server, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed, 1 passed" in result.stdout
    assert "scoped inbox" in result.stdout
    page = f"{server.url}/_inbox/ui/scopes/{failed_scope}"
    assert f"scope {failed_scope} was kept for a look: {page}" in result.stdout
    assert _count(server, failed_scope) == 1
    assert _count(server, passed_scope) == 0


def test_a_conftest_naming_the_plugin_still_works_beside_the_entry_point(
    server: Server, tmp_path
):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["authsvc.testing"]\n')
    (tmp_path / "test_theirs.py").write_text(_THEIR_TESTS.split("def test_that_fails")[0])
    result, _ = _run_their_suite(server, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
