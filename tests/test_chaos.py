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


def _report_line(*fields: str) -> re.Pattern[str]:
    """The harness's one summary line: `name=N` for each field (a `k=v` field is literal)."""
    parts = [field if "=" in field else rf"{field}=(?P<{field}>\d+)" for field in fields]
    return re.compile(r"^chaos: " + " ".join(parts) + "$", re.MULTILINE)


COUNTS = ("lost", "stuck", "duplicates", "crash_window", "stale_redemptions", "kills")
LINE = _report_line(
    "requests", "expected", "delivered", *COUNTS, "max_duplicates_per_kill", "db_restarts"
)
HTTP_LINE = _report_line("requests", "transport=http", "expected", "delivered", *COUNTS,
                         "db_restarts")


def _run_chaos(
    tmp_path: Path, line: re.Pattern[str], *options: str
) -> tuple[dict[str, int], subprocess.CompletedProcess[str], str]:
    """Run the harness's short mode; its figures, the run and its output, once it passed."""
    run = subprocess.run(
        [sys.executable, "-m", "chaos", *options, "--requests", "500", "--workers", "3",
         "--kills", "6", "--logs", str(tmp_path / "logs")],
        cwd=ROOT, capture_output=True, text=True, timeout=230,
    )
    report = run.stdout + run.stderr
    assert len(line.findall(run.stdout)) == 1, report
    found = line.search(run.stdout)
    assert found is not None, report
    figures = {k: int(v) for k, v in found.groupdict().items()}
    assert run.returncode == 0, report
    assert figures["requests"] == 500
    assert figures["lost"] == figures["stuck"] == figures["stale_redemptions"] == 0, report
    assert figures["delivered"] == figures["expected"] > 0
    return figures, run, report


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_no_email_lost_or_stale_link_redeemed_under_faults(tmp_path: Path) -> None:
    figures, run, report = _run_chaos(tmp_path, LINE)
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


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_provider_idempotency_closes_the_crash_window(tmp_path: Path) -> None:
    """SPEC §10: kills after the provider accepted and before the worker recorded, plus
    provider faults, deliver every email exactly once over HTTP with an idempotency key."""
    # Slower load (about 14 s instead of 10): each kill waits for an acceptance
    # after it is armed, so the six must fall inside the load, or the last one
    # can find nothing left to send ("only 5 of 6 kills happened", seen in CI).
    figures, run, report = _run_chaos(tmp_path, HTTP_LINE, "--transport", "http", "--rate", "35")
    assert figures["duplicates"] == 0, report
    assert figures["crash_window"] == figures["kills"] >= 6, report
    assert figures["db_restarts"] == 1
    assert "'rate_limited': 0" not in run.stderr and "'server_error': 0" not in run.stderr
    assert not _clusters_running(run.stderr), "the harness left PostgreSQL running"
