"""Enqueue → SMTP acceptance latency with an idle `authsvc worker` (target p50 < 50 ms).

Run: .venv/bin/python -m bench.worker_latency   (writes bench/results/worker_latency.txt)
Each email is queued in its own committed transaction (which NOTIFYs) only
after the previous one arrived, so the worker is idle, waiting on LISTEN.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time

import psycopg

from authsvc.outbox import enqueue_email
from bench.common import authsvc_script, fresh_database, percentile, report, statistics, worker_env
from testkit.smtp_double import SmtpDouble

SAMPLES = 200


def main() -> None:
    with fresh_database() as url, SmtpDouble() as smtp, tempfile.TemporaryDirectory() as data:
        worker = subprocess.Popen(
            [authsvc_script(), "worker", "--poll-seconds", "30"],
            env=worker_env(url, smtp.url, data), stderr=subprocess.DEVNULL,
        )
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                # Warm up: the first email also waits for the worker to start.
                latencies = []
                for i in range(SAMPLES + 1):
                    with conn.transaction():
                        enqueue_email(
                            conn, template="password_changed", recipient=f"u{i}@example.com"
                        )
                    committed = time.time()
                    [*_, message] = smtp.wait_for(i + 1, timeout=30)
                    if i:
                        latencies.append((message.received_at - committed) * 1000)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    report("worker_latency", [
        f"enqueue -> SMTP acceptance, idle worker woken by NOTIFY,"
        f" {SAMPLES} emails queued one at a time",
        f"p50 {percentile(latencies, 0.50):.1f} ms",
        f"p95 {percentile(latencies, 0.95):.1f} ms",
        f"max {max(latencies):.1f} ms",
        f"mean {statistics.fmean(latencies):.1f} ms",
    ])


if __name__ == "__main__":
    main()
