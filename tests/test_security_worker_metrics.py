"""`authsvc worker --metrics-port` behind AUTHSVC_METRICS_TOKEN, as `/metrics` is.

The worker's claim counter moves only when a job was queued, and reset and
sign-in requests queue one only for an existing account: an open scrape would
tell an outsider which addresses have accounts.
"""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from testkit.smtp_double import SmtpDouble
from testkit.waiting import free_port, free_ports, http_status, wait_until, wait_until_ready
from tests.worker_support import queue_notices, start_worker_process, stop_process

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "scrape-token-0123456789"
CLAIMED = "authsvc_worker_claimed_jobs_total"


def _scrape(url: str, authorization: str | None = None) -> tuple[int, str, str | None]:
    """(status, body, WWW-Authenticate) of a GET."""
    headers = {"Authorization": authorization} if authorization is not None else {}
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (loopback)
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310
            return int(reply.status), reply.read().decode(), None
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode(), error.headers.get("WWW-Authenticate")


def _claimed(body: str) -> float:
    match = re.search(rf"^{CLAIMED} (\S+)$", body, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_each_worker_process_s_metrics_need_the_token(conn, env, tmp_path):
    jobs = len(queue_notices(conn, 3))
    ports = free_ports(2)  # the second process serves on the port after the first's
    urls = [f"http://127.0.0.1:{port}/metrics" for port in ports]
    with SmtpDouble() as smtp:
        env = {**env, "AUTHSVC_SMTP_URL": smtp.url, "AUTHSVC_METRICS_TOKEN": TOKEN}
        process = start_worker_process(env, tmp_path / "worker.log", "--processes", "2",
                                       "--poll-seconds", "0.2", "--metrics-port", str(ports[0]))
        try:
            for url in urls:
                wait_until_ready(url, timeout=30, ready=lambda _status: True)  # any answer

            def claimed_in_all() -> bool:
                return sum(_claimed(_scrape(u, f"Bearer {TOKEN}")[1]) for u in urls) == jobs

            wait_until(claimed_in_all, 30, "both processes' counters to show every claim")
            for url in urls:
                for authorization in (None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}",
                                      f"Bearer {TOKEN}x", "Bearer", f"bearer {TOKEN[:-1]}"):
                    status, body, challenge = _scrape(url, authorization)
                    assert status == 401, (url, authorization, status)
                    assert "authsvc_worker" not in body, body
                    assert challenge is not None and challenge.startswith("Bearer")
                status, body, _ = _scrape(url, f"Bearer {TOKEN}")
                assert status == 200 and CLAIMED in body
        finally:
            code = stop_process(process)
            assert code == 0, (tmp_path / "worker.log").read_text()[-3000:]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_production_refuses_worker_metrics_without_a_token(env, tmp_path, processes):
    port = free_port()
    production = {
        **env,
        "AUTHSVC_ENV": "production",
        "AUTHSVC_BASE_URL": "https://auth.example.com",
        "AUTHSVC_SMTP_URL": "smtp://127.0.0.1:1",
    }
    argv = [sys.executable, "-m", "authsvc.cli", "worker", "--processes", processes,
            "--metrics-port", str(port)]
    run = subprocess.run(argv, env=production, cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode != 0, run.stdout + run.stderr
    assert run.stderr.count("AUTHSVC_METRICS_TOKEN: required in production") == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert http_status(f"http://127.0.0.1:{port}/metrics") is None
