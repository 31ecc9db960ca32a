"""The chaos harness, short mode: 500 requests through real processes under faults.

`make chaos` runs the long mode (5,000 requests, 4 workers, 20+ kills).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from chaos.fleet import MAX_RESENDS_PER_KILL

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(
    r"^chaos: requests=(?P<requests>\d+) expected=(?P<expected>\d+) delivered=(?P<delivered>\d+)"
    r" lost=(?P<lost>\d+) stuck=(?P<stuck>\d+) duplicates=(?P<duplicates>\d+)"
    r" crash_window=(?P<crash_window>\d+) stale_redemptions=(?P<stale_redemptions>\d+)"
    r" kills=(?P<kills>\d+) max_duplicates_per_kill=(?P<max_duplicates_per_kill>\d+)"
    r" db_restarts=(?P<db_restarts>\d+)$",
    re.MULTILINE,
)


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_no_email_lost_or_stale_link_redeemed_under_faults(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "chaos", "--requests", "500", "--workers", "3", "--kills", "6",
         "--logs", str(tmp_path / "logs")],
        cwd=ROOT, capture_output=True, text=True, timeout=230,
    )
    report = run.stdout + run.stderr
    lines = LINE.findall(run.stdout)
    assert len(lines) == 1, report
    figures = {k: int(v) for k, v in LINE.search(run.stdout).groupdict().items()}
    assert run.returncode == 0, report
    assert figures["requests"] == 500
    assert figures["lost"] == figures["stuck"] == figures["stale_redemptions"] == 0, report
    assert figures["delivered"] == figures["expected"] > 0
    assert figures["duplicates"] <= figures["crash_window"]
    assert figures["max_duplicates_per_kill"] <= MAX_RESENDS_PER_KILL, report
    assert figures["kills"] >= 6 and figures["db_restarts"] == 1
    assert "stale 410 token_superseded" in run.stderr, "no stale link was delivered and tried"
    assert not _clusters_running(run.stderr), "the harness left PostgreSQL running"


def _clusters_running(stderr: str) -> set[int]:
    """Processes of this run's cluster (others may run chaos on the same machine)."""
    match = re.search(r"^  cluster: (/\S+)$", stderr, re.MULTILINE)
    assert match, "the harness did not say where its cluster was"
    return {
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if any(match.group(1) in part for part in (p.info["cmdline"] or []))
    }


HTTP_LINE = re.compile(
    r"^chaos: requests=(?P<requests>\d+) transport=http expected=(?P<expected>\d+)"
    r" delivered=(?P<delivered>\d+) lost=(?P<lost>\d+) stuck=(?P<stuck>\d+)"
    r" duplicates=(?P<duplicates>\d+) crash_window=(?P<crash_window>\d+)"
    r" stale_redemptions=(?P<stale_redemptions>\d+) kills=(?P<kills>\d+)"
    r" db_restarts=(?P<db_restarts>\d+)$",
    re.MULTILINE,
)


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_provider_idempotency_closes_the_crash_window(tmp_path: Path) -> None:
    """SPEC §10: kills after the provider accepted and before the worker recorded, plus
    provider faults, deliver every email exactly once over HTTP with an idempotency key."""
    run = subprocess.run(
        [sys.executable, "-m", "chaos", "--transport", "http", "--requests", "500",
         "--workers", "3", "--kills", "6", "--logs", str(tmp_path / "logs")],
        cwd=ROOT, capture_output=True, text=True, timeout=230,
    )
    report = run.stdout + run.stderr
    assert len(HTTP_LINE.findall(run.stdout)) == 1, report
    figures = {k: int(v) for k, v in HTTP_LINE.search(run.stdout).groupdict().items()}
    assert run.returncode == 0, report
    assert figures["requests"] == 500
    assert figures["lost"] == figures["stuck"] == figures["stale_redemptions"] == 0, report
    assert figures["delivered"] == figures["expected"] > 0
    assert figures["duplicates"] == 0, report
    assert figures["crash_window"] == figures["kills"] >= 6, report
    assert figures["db_restarts"] == 1
    assert "'rate_limited': 0" not in run.stderr and "'server_error': 0" not in run.stderr
    assert not _clusters_running(run.stderr), "the harness left PostgreSQL running"
