"""Drain rates of authsvc's worker: mechanics (in-process, no-op mail) and the full pipeline.

Rates are read from the audit trail (first claim to last record), so process
start-up is not counted for anyone.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import tempfile
from datetime import datetime, timedelta
from typing import Any

import psycopg

from authsvc.worker.jobs import ClaimedJob
from authsvc.worker.loop import Worker, WorkerOptions
from authsvc.worker.mailers import OutgoingEmail
from bench.common import authsvc_script, queue_notices, worker_env

_DATA = b"Subject: x\r\n\r\nx\r\n"


class _DayLongLinks:
    """What the worker's housekeeping asks of the codec: the longest link lifetime."""

    def longest_code_ttl(self) -> timedelta:
        return timedelta(days=1)


class _StubRenderer:
    """Mechanics: no template, no link, no MIME; one fixed message."""

    codec = _DayLongLinks()

    def link_expires_at(self, _job: ClaimedJob) -> datetime | None:
        return None

    def render(self, job: ClaimedJob) -> OutgoingEmail:
        return OutgoingEmail(job.id, job.public_id, "a@b", job.recipient,
                             f"<authsvc-job-{job.public_id}@b>", _DATA)


class _NoopMailer:
    def send(self, email: OutgoingEmail) -> str:
        return email.message_id

    def close(self) -> None:
        pass


def queue_resets(url: str, jobs: int) -> None:
    """Reset links for fresh users: the pipeline mints, renders and builds each one."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO users (email, password_hash)"
            " SELECT 'r' || n || '@example.com', 'x' FROM generate_series(1, %s) n", (jobs,),
        )
        conn.execute(
            "INSERT INTO email_jobs (template, recipient, user_id, purpose, token_version,"
            " issued_at) SELECT 'reset', email, id, 'reset', reset_version, now() FROM users"
        )
        conn.execute("VACUUM ANALYZE")


def trail_rate(url: str, jobs: int) -> float:
    """Jobs/s from the first claim to the last recorded outcome; all must be sent."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'sent') FROM email_jobs").fetchone()
        assert row is not None and row[0] == jobs, f"{row} of {jobs} sent"
        span = conn.execute(
            "SELECT extract(epoch FROM max(created_at) FILTER (WHERE event = 'sent')"
            " - min(created_at) FILTER (WHERE event = 'claimed')) FROM email_job_events"
        ).fetchone()
    assert span is not None
    return jobs / max(float(span[0]), 1e-6)


def _mechanics_process(url: str, options: dict[str, Any]) -> None:
    # The connection options `authsvc worker` gets here (the URL is the
    # direct one: authsvc.db.is_direct), without its LISTEN: --once drains.
    Worker(url, _StubRenderer(), lambda _t: _NoopMailer(),  # type: ignore[arg-type]
           WorkerOptions(once=True, **options), listen_url=url).run()


def mechanics_drain(url: str, jobs: int, *, concurrency: int, batch: int,
                    processes: int = 1) -> float:
    """authsvc's real Worker (claims, completer, trail) with no rendering and a no-op mailer."""
    queue_notices(url, jobs)
    options = {"concurrency": concurrency, "batch": batch}
    context = multiprocessing.get_context("spawn")
    children = [context.Process(target=_mechanics_process, args=(url, options))
                for _ in range(processes)]
    for child in children:
        child.start()
    for child in children:
        child.join(600)
        assert child.exitcode == 0, child.exitcode
    return trail_rate(url, jobs)


def pipeline_drain(url: str, jobs: int, *, concurrency: int, batch: int,
                   processes: int = 1) -> float:
    """`authsvc worker --once` to null://: claim, mint, render, build MIME, discard, record."""
    queue_resets(url, jobs)
    with tempfile.TemporaryDirectory() as data:
        subprocess.run(
            [authsvc_script(), "worker", "--once", "--processes", str(processes),
             "--concurrency", str(concurrency), "--batch", str(batch)],
            env=worker_env(url, "null://", data), stderr=subprocess.DEVNULL, check=True,
            timeout=600,
        )
    return trail_rate(url, jobs)
