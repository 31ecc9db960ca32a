"""`authsvc serve` as operators run it: gunicorn, JSON log lines, clean SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from testkit.waiting import free_port, wait_until

AUTHSVC = str(Path(sys.executable).parent / "authsvc")


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:  # noqa: S310 (loopback)
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return 0


@pytest.mark.e2e
def test_serve_logs_json_lines_without_tokens_and_stops_on_sigterm(env, tmp_path):
    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [AUTHSVC, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _get(base + "/healthz") == 200, timeout=30, what="gunicorn")
            assert _get(base + "/verify?token=not-a-real-token.abcdefghijklmnopqrstuvwxyz") == 400
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == 0
        finally:
            if server.poll() is None:
                server.kill()

    lines = [line for line in log_path.read_text().splitlines() if line.startswith("{")]
    events = [json.loads(line) for line in lines]
    requests = [e for e in events if e.get("event") == "http_request"]
    assert {"path": "/verify", "status": 400} in [
        {"path": r["path"], "status": r["status"]} for r in requests
    ]
    assert any(e.get("event") == "link_refused" for e in events), events
    assert "not-a-real-token" not in log_path.read_text()
    assert not (tmp_path / ".gunicorn").exists(), "no shared control socket"
