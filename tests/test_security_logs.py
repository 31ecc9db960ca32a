"""No token and no password in any log line, across a full run of real processes.

The API under gunicorn (with its access log) and an outbox worker handle a
signup, a verification, logins right and wrong, a reset request, a person
opening both links in a browser, and the reset itself. Then every line they
logged is scanned for each secret that passed through them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from authsvc.apps.keys import register_app
from chaos.smtp import FaultRates, FaultySmtp, Receipt
from testkit.waiting import free_port, wait_until, wait_until_ready
from tests.conftest import TEST_KEY

ROOT = Path(__file__).resolve().parent.parent
FIRST_PASSWORD = "first long passphrase 1"
WRONG_PASSWORD = "not my passphrase at all"
SECOND_PASSWORD = "second long passphrase 2"
WEAK_PASSWORD = "tiny7"  # refused: too short


class Http:
    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key

    def call(self, method: str, path: str, body: dict | None = None) -> int:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"}
        request = urllib.request.Request(  # noqa: S310  (always http://127.0.0.1)
            self.base + path, data, headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310
                return int(reply.status)
        except urllib.error.HTTPError as error:
            return int(error.code)


@pytest.fixture
def receiver() -> Iterator[FaultySmtp]:
    server = FaultySmtp(FaultRates(0, 0, 0), seed=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def processes(
    env: dict[str, str], receiver: FaultySmtp, tmp_path: Path
) -> Iterator[tuple[str, Path]]:
    """`authsvc serve` and `authsvc worker`, both logging into one folder."""
    port = free_port()
    process_env = {**os.environ, **env, "AUTHSVC_SMTP_URL": receiver.url,
                   "AUTHSVC_BASE_URL": f"http://127.0.0.1:{port}"}
    logs = tmp_path / "logs"
    logs.mkdir()
    cli = [sys.executable, "-m", "authsvc.cli"]
    commands = {
        "api": [*cli, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4"],
        "worker": [*cli, "worker", "--poll-seconds", "0.2"],
    }
    running = []
    for name, argv in commands.items():
        out = (logs / f"{name}.log").open("wb")
        running.append((subprocess.Popen(argv, env=process_env, cwd=ROOT, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True), out))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(base + "/readyz", running[0][0], output=(logs / "api.log").read_text)
        yield base, logs
    finally:
        for process, out in running:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
            out.close()


def _token(receiver: FaultySmtp, count: int) -> Receipt:
    wait_until(lambda: len(receiver.snapshot()) >= count, 30, f"email #{count}")
    return receiver.snapshot()[count - 1]


@pytest.mark.e2e
def test_logs_of_a_full_run_hold_no_token_or_password(conn: psycopg.Connection, processes,
                                                      receiver: FaultySmtp) -> None:
    base, logs = processes
    _app, key = register_app(conn, "logs", ["http://127.0.0.1/"])
    api = Http(base, key)
    email = "logged@example.com"

    assert api.call("POST", "/api/v1/signups", {"email": email, "password": FIRST_PASSWORD}) == 202
    verify = _token(receiver, 1)
    assert api.call("GET", f"/verify?token={verify.token}") == 200  # a person opens the link
    assert api.call("POST", "/api/v1/verifications/confirm", {"token": verify.token}) == 200
    assert api.call("POST", "/api/v1/sessions", {"email": email, "password": FIRST_PASSWORD}) == 200
    assert api.call("POST", "/api/v1/sessions", {"email": email, "password": WRONG_PASSWORD}) == 401
    assert api.call("POST", "/api/v1/password-resets", {"email": email}) == 202
    reset = _token(receiver, 2)
    assert verify.token is not None and reset.token is not None
    assert api.call("GET", f"/reset/confirm?token={reset.token}") == 200
    weak = {"token": reset.token, "password": WEAK_PASSWORD}
    assert api.call("POST", "/api/v1/password-resets/confirm", weak) == 422
    strong = {"token": reset.token, "password": SECOND_PASSWORD}
    assert api.call("POST", "/api/v1/password-resets/confirm", strong) == 200
    _token(receiver, 3)  # the "password changed" notice went through the worker too

    secrets = {
        "verify token": verify.token,
        "reset token": reset.token,
        "token signature": reset.token.rsplit(".", 1)[-1],
        "password": FIRST_PASSWORD,
        "wrong password": WRONG_PASSWORD,
        "new password": SECOND_PASSWORD,
        "weak password": WEAK_PASSWORD,
        "api key": key,
        "signing key": TEST_KEY,
    }
    text = {path.name: path.read_text("utf-8", "replace") for path in logs.iterdir()}
    # The scan means something only if the requests were logged at all.
    requests = [
        (entry["method"], entry["path"])
        for entry in map(json.loads, re.findall(r"^\{.*\}$", text["api.log"], re.MULTILINE))
        if entry.get("event") == "http_request"
    ]
    assert ("POST", "/api/v1/password-resets/confirm") in requests, text["api.log"]
    assert ("GET", "/verify") in requests, "opening the link was not logged"
    assert '"event":"sent"' in text["worker.log"]
    leaks = [
        f"{what} in {name}: {line[:160]}"
        for name, body in text.items()
        for line in body.splitlines()
        for what, secret in secrets.items()
        if secret and secret in line
    ]
    assert not leaks, "\n".join(leaks)
