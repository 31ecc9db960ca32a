"""Issue 6 end to end: retried reset requests through HTTP, the real worker and the test inbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest
from werkzeug.serving import make_server

from authsvc.apps.keys import register_app
from authsvc.testing import ScopedInbox
from authsvc.web.app import create_app
from testkit.waiting import free_port
from tests.accounts_support import insert_user
from tests.api_support import job_count
from tests.inbox_support import inbox_services, running_sink, serving_inbox

pytestmark = pytest.mark.e2e


def _post(url: str, key: str, body: dict[str, object], idempotency_key: str) -> tuple[int, bytes]:
    request = Request(  # noqa: S310 - local test server
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency_key,
        },
    )
    try:
        with urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, response.read()
    except HTTPError as exc:
        return exc.code, exc.read()


def _drain_outbox(env: dict[str, str], log: Path) -> None:
    """Run `authsvc worker --once` as an operator would."""
    with log.open("ab") as out:
        done = subprocess.run(
            [sys.executable, "-m", "authsvc.cli", "worker", "--once"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, log.read_text()


@pytest.fixture
def stack(env, pool, passwords, tmp_path) -> Iterator[tuple[str, dict[str, str]]]:
    """As `authsvc dev`: the inbox's server before the web app, the sink; (base URL, worker env)."""
    with running_sink(pool) as sink:
        port = free_port()
        stack_env = {
            **env,
            "AUTHSVC_BASE_URL": f"http://127.0.0.1:{port}",
            "AUTHSVC_TEST_INBOX": "on",
            "AUTHSVC_SMTP_URL": f"smtp://127.0.0.1:{sink.port}",
        }
        svc = inbox_services(stack_env, pool, passwords)
        app = create_app(svc.settings, pool=pool, passwords=passwords)
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            with serving_inbox(
                sink, svc, listen_url=env["AUTHSVC_DIRECT_DATABASE_URL"], port=port,
                upstream=f"http://127.0.0.1:{server.server_port}",
            ) as url:
                yield url, {**os.environ, **stack_env}
        finally:
            server.shutdown()
            thread.join(timeout=10)


def test_retried_reset_sends_one_email_and_a_fresh_key_sends_another(
    stack, conn, passwords, tmp_path
):
    url, worker_env = stack
    inbox = ScopedInbox(url)
    address = inbox.address("ann")
    insert_user(conn, address, passwords.hash("correct horse battery"))
    _app, key = register_app(conn, "shop", ["https://allowed.example.com/"])
    endpoint = url + "/api/v1/password-resets"

    # The app's call "times out" twice and it retries with the same key.
    answers = [_post(endpoint, key, {"email": address}, "reset-ann-1") for _ in range(3)]
    assert answers == [(202, b'{"status":"accepted"}')] * 3
    # One job, not three superseded ones: the outbox never saw the retries.
    assert job_count(conn, address) == 1
    _drain_outbox(worker_env, tmp_path / "worker.log")
    first = inbox.expect_one(timeout=10, settle=1)
    assert inbox.link(first, containing="token=")

    assert _post(endpoint, key, {"email": address}, "reset-ann-2")[0] == 202
    _drain_outbox(worker_env, tmp_path / "worker.log")
    second = inbox.expect_one(timeout=10, settle=1)
    assert second.id != first.id and second.message_id != first.message_id
    assert job_count(conn, address) == 2
