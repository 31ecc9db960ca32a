"""The test inbox is unreachable in production: refused at start-up, absent when serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from testkit.waiting import free_port, wait_until_ready

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "authsvc.cli"]


@pytest.fixture
def production_env(env: dict[str, str]) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AUTHSVC_")},
        **env,
        "AUTHSVC_ENV": "production",
        "AUTHSVC_BASE_URL": "https://auth.example.com",
        "AUTHSVC_SMTP_URL": "smtp://127.0.0.1:1",
        "AUTHSVC_METRICS_TOKEN": "scrape-token-0123456789",
    }


def _status(url: str, method: str = "GET") -> int:
    body = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, method=method, data=body)  # noqa: S310  (127.0.0.1)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["serve", "inbox", "dev", "worker"])
def test_production_refuses_to_start_with_the_test_inbox_on(production_env, command) -> None:
    env = {**production_env, "AUTHSVC_TEST_INBOX": "on"}
    ports = ["--port", str(free_port()), "--smtp-port", str(free_port())]
    argv = [*CLI, command, *(ports if command == "dev" else [])]
    run = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "AUTHSVC_TEST_INBOX" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.e2e
def test_dev_refuses_production_even_without_the_inbox_variable(production_env) -> None:
    """`authsvc dev` turns the test inbox on by itself, so production must stop it too."""
    ports = ["--port", str(free_port()), "--smtp-port", str(free_port())]
    run = subprocess.run([*CLI, "dev", *ports], env=production_env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0, run.stdout + run.stderr
    assert "production" in run.stderr.lower(), run.stderr


@pytest.mark.e2e
def test_production_server_has_no_inbox_endpoints(production_env) -> None:
    port = free_port()
    server = subprocess.Popen(
        [*CLI, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2"],
        env=production_env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base + "/readyz", server)
        assert _status(base + "/_inbox/scopes", "POST") == 404
        assert _status(base + "/_inbox/scopes/qa/messages?wait=0") == 404
        assert _status(base + "/_inbox/scopes/qa/expect-one?timeout=0") == 404
        assert _status(base + "/healthz") == 200  # the server itself answers
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
