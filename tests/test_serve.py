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


LOG_KEYS = {"ts", "level", "logger", "event", "message"}


@pytest.mark.e2e
def test_serve_logs_one_json_shape_on_stderr_without_tokens_and_stops_on_sigterm(env, tmp_path):
    """gunicorn's own lines, its access lines and the app's: the same keys, one stream."""
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
            wait_until(lambda: _get(base + "/healthz") == 200, timeout=30, what="gunicorn")
            assert _get(base + "/verify?token=not-a-real-token.abcdefghijklmnopqrstuvwxyz") == 400
            assert _get(base + "/no-such-page") == 404
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == 0
        finally:
            if server.poll() is None:
                server.kill()

    assert out_path.read_text() == ""
    text = err_path.read_text()
    entries = [json.loads(line) for line in text.splitlines()]  # every line, none skipped
    assert entries
    for entry in entries:
        assert LOG_KEYS <= entry.keys(), entry
        assert entry["level"] in {"debug", "info", "warning", "error", "critical"}, entry
        assert datetime.fromisoformat(entry["ts"]).tzinfo is not None, entry
    loggers = {entry["logger"] for entry in entries}
    assert {"gunicorn.error", "gunicorn.access"} <= loggers, loggers
    starting = [e for e in entries if e["message"].startswith("Starting gunicorn")]
    assert starting and starting[0]["event"] == "log"
    requests = [e for e in entries if e["event"] == "http_request"]
    seen = {(r["path"], r["status"]) for r in requests}
    assert seen >= {("/verify", 400), ("/no-such-page", 404)}, seen
    assert all(isinstance(r["duration_ms"], float | int) for r in requests)
    refused = [e for e in entries if e["event"] == "link_refused"]
    assert refused and refused[0]["logger"].startswith("authsvc"), entries
    assert "not-a-real-token" not in text
    assert not (tmp_path / ".gunicorn").exists(), "no shared control socket"
