"""Emails per second when every SMTP send takes 200 ms, at --concurrency 20 (target ≥ 80).

Run: .venv/bin/python -m bench.worker_throughput   (writes bench/results/worker_throughput.txt)
"""

from __future__ import annotations

import subprocess
import tempfile
import time

import psycopg

from bench.common import authsvc_script, fresh_database, report, worker_env
from testkit.smtp_double import SmtpDouble

JOBS = 800
SEND_SECONDS = 0.2
CONCURRENCY = 20


def main() -> None:
    with (
        fresh_database() as url,
        SmtpDouble(delay_seconds=SEND_SECONDS) as smtp,
        tempfile.TemporaryDirectory() as data,
    ):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO email_jobs (template, recipient)"
                " SELECT 'password_changed', 'u' || n || '@example.com'"
                " FROM generate_series(1, %s) n", (JOBS,)
            )
        started = time.monotonic()
        worker = subprocess.run(
            [authsvc_script(), "worker", "--once", "--concurrency", str(CONCURRENCY),
             "--batch", str(2 * CONCURRENCY)],
            env=worker_env(url, smtp.url, data), stderr=subprocess.DEVNULL, check=True,
        )
        wall = time.monotonic() - started
        messages = smtp.wait_for(JOBS, timeout=10)
        first = min(m.received_at for m in messages)
        last = max(m.received_at for m in messages)
        with psycopg.connect(url, autocommit=True) as conn:
            sent = conn.execute("SELECT count(*) FROM email_jobs WHERE status = 'sent'").fetchone()
    assert worker.returncode == 0 and sent == (JOBS,)
    rate = (JOBS - 1) / (last - first)
    report("worker_throughput", [
        f"{JOBS} queued emails, each SMTP send held {SEND_SECONDS * 1000:.0f} ms by the server,"
        f" authsvc worker --once --concurrency {CONCURRENCY} --batch {2 * CONCURRENCY}",
        f"steady rate (first to last accepted): {rate:.1f} emails/s"
        f" (ideal {CONCURRENCY / SEND_SECONDS:.0f})",
        f"whole process incl. start-up: {JOBS / wall:.1f} emails/s ({wall:.1f} s)",
    ])


if __name__ == "__main__":
    main()
