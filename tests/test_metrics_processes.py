"""/metrics under gunicorn with several workers: one set of counters, never going backwards."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testkit.waiting import free_port, wait_until

AUTHSVC = str(Path(sys.executable).parent / "authsvc")
ROUND = 6  # health checks between two scrapes
HEALTHZ = 'authsvc_http_requests_total{method="GET",route="/healthz",status="200"}'


def _fetch(url: str) -> tuple[int, str]:
    # A new connection each time, so gunicorn's workers take turns answering.
    request = urllib.request.Request(url, headers={"Connection": "close"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 (loopback)
        return int(reply.status), reply.read().decode()


def _ready(url: str) -> bool:
    try:
        return _fetch(url)[0] == 200
    except OSError:
        return False


def _worker_files(folder: Path) -> set[str]:
    """The pids that wrote counters (prometheus_client: counter_<pid>.db)."""
    return {path.stem.rsplit("_", 1)[-1] for path in folder.glob("counter_*.db")}


def _series(body: str, series: str) -> float:
    match = re.search(rf"^{re.escape(series)} (\S+)$", body, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


@pytest.mark.e2e
def test_two_gunicorn_workers_report_one_monotonic_set_of_counters(env, tmp_path):
    """20 scrapes, whichever worker answers: the healthz count is every request, in order."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    stale = tmp_path / "metrics"
    stale.mkdir()
    (stale / "counter_999999.db").write_bytes(b"left by a previous run")
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [AUTHSVC, "serve", "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "1"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env,
             "PROMETHEUS_MULTIPROC_DIR": str(stale)},
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: _ready(base + "/readyz"), timeout=30, what="gunicorn")
        assert not (stale / "counter_999999.db").exists(), "the previous run's files stayed"
        seen: list[float] = []
        sent = 0
        with ThreadPoolExecutor(ROUND) as pool:

            def health_round() -> int:
                # Concurrent connections, so both workers take some of them.
                statuses = list(pool.map(lambda _i: _fetch(base + "/healthz")[0], range(ROUND)))
                assert statuses == [200] * ROUND
                return ROUND

            # Until both workers have answered at least once (each then has its file).
            for _ in range(200):
                if len(_worker_files(stale)) == 2:
                    break
                sent += health_round()
            assert len(_worker_files(stale)) == 2, "one worker answered everything"
            for scrape in range(1, 21):
                sent += health_round()
                status, body = _fetch(base + "/metrics")
                assert status == 200
                seen.append(_series(body, HEALTHZ))
                # Per-process counters would show only the answering worker's share.
                assert seen[-1] == sent, f"scrape {scrape}: {seen} after {sent} checks"
        assert seen == sorted(seen)
        assert "authsvc_http_request_duration_seconds_count" in body
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_worker_serves_its_own_counters(database_url, conn, settings):
    """`authsvc worker --metrics-port`: claims, outcomes and send time of this process."""
    from authsvc.worker.metrics_port import WorkerMetrics
    from testkit.smtp_double import SmtpDouble
    from tests.worker_support import queue_notices, worker

    queue_notices(conn, 3)
    with SmtpDouble() as smtp:
        w = worker(database_url, settings, smtp.url, once=True)
        w.metrics = WorkerMetrics()
        w.run()
    port = free_port()
    w.metrics.serve(port)
    status, body = _fetch(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    assert _series(body, "authsvc_worker_claimed_jobs_total") == 3
    assert _series(body, 'authsvc_worker_outcomes_total{event="sent"}') == 3
    assert _series(body, "authsvc_worker_send_seconds_count") == 3
    assert _series(body, "authsvc_worker_unfinished_jobs") == 0
