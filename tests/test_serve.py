"""`authsvc serve` as operators run it: gunicorn, JSON log lines, clean SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from tests.inbox_support import free_port, wait_for

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
            wait_for(lambda: _get(base + "/healthz") == 200, timeout=30, what="gunicorn")
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


LOG_KEYS = {"ts", "level", "logger", "event", "message"}


@pytest.mark.e2e
def test_serve_writes_one_json_shape_on_stderr_only(env, tmp_path):
    """gunicorn's own lines, its access lines and the app's: same keys, one stream."""
    port = free_port()
    out_path, err_path = tmp_path / "serve.out", tmp_path / "serve.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        server = subprocess.Popen(
            [AUTHSVC, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
            stdout=out,
            stderr=err,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for(lambda: _get(base + "/healthz") == 200, timeout=30, what="gunicorn")
            assert _get(base + "/verify?token=not-a-real-token.abcdefghijklmnopqrstuvwxyz") == 400
            assert _get(base + "/no-such-page") == 404
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == 0
        finally:
            if server.poll() is None:
                server.kill()

    assert out_path.read_text() == ""
    lines = err_path.read_text().splitlines()
    entries = [json.loads(line) for line in lines]  # every line, not only those that look like JSON
    assert entries
    for entry in entries:
        assert LOG_KEYS <= entry.keys(), entry
        assert entry["level"] in {"debug", "info", "warning", "error", "critical"}, entry
        assert datetime.fromisoformat(entry["ts"]).tzinfo is not None, entry
    loggers = {entry["logger"] for entry in entries}
    assert {"gunicorn.error", "gunicorn.access"} <= loggers, loggers
    assert any(name.startswith("authsvc") for name in loggers), loggers
    starting = [e for e in entries if e["message"].startswith("Starting gunicorn")]
    assert starting and starting[0]["event"] == "log"
    requests = [e for e in entries if e["event"] == "http_request"]
    seen = {(r["path"], r["status"]) for r in requests}
    assert seen >= {("/verify", 400), ("/no-such-page", 404)}, seen
    assert all(isinstance(r["duration_ms"], float | int) for r in requests)
