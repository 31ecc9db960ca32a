"""Helpers shared by the worker tests: queue jobs, run a worker, wait on conditions."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from authsvc.clock import Clock, system_clock
from authsvc.config import Settings, parse_smtp_url
from authsvc.emails.looks import database_looks
from authsvc.services import token_codec
from authsvc.worker import jobs
from authsvc.worker.delivery import Delivery, RetryPolicy
from authsvc.worker.jobs import ClaimedJob
from authsvc.worker.loop import Worker, WorkerOptions
from authsvc.worker.mailers import Mailer, OutgoingEmail, SmtpMailer
from authsvc.worker.render import Renderer

FAR = float("inf")  # a lease deadline that never stops a direct deliver() call


def renderer(settings: Settings, clock: Clock = system_clock) -> Renderer:
    """The worker's renderer as `authsvc worker` builds it: apps' looks from the database."""
    looks = (database_looks(settings.database_url, settings.product_name, ttl=0.0)
             if settings.database_url else None)
    return Renderer(settings, token_codec(settings, clock), clock, looks=looks)


def smtp_factory(smtp_url: str) -> Callable[[float], SmtpMailer]:
    target = parse_smtp_url(smtp_url)
    return lambda timeout: SmtpMailer(target, timeout=timeout)


def worker(url: str, settings: Settings, smtp_url: str, clock: Clock = system_clock,
           **options: object) -> Worker:
    """An in-process worker against `url`, sending to `smtp_url`."""
    listen_url = options.pop("listen_url", settings.direct_database_url)
    return Worker(url, renderer(settings, clock), smtp_factory(smtp_url),
                  WorkerOptions(**options), listen_url=listen_url)  # type: ignore[arg-type]


def delivery(pool: object, settings: Settings, clock: Clock = system_clock,
             retry: RetryPolicy | None = None, send_timeout: float = 2.0) -> Delivery:
    return Delivery(pool, renderer(settings, clock), retry or RetryPolicy(),  # type: ignore[arg-type]
                    send_timeout, clock)


@contextmanager
def running(w: Worker) -> Iterator[Worker]:
    """Run `w` in a thread for the duration of the block, then stop it."""
    thread = threading.Thread(target=w.run, daemon=True)
    thread.start()
    try:
        yield w
    finally:
        w.request_stop()
        thread.join(15)
        assert not thread.is_alive(), "worker did not stop"


def add_users(conn: psycopg.Connection, count: int, prefix: str = "user") -> list[int]:
    rows = conn.execute(
        "INSERT INTO users (email, password_hash)"
        " SELECT %s || n || '@example.com', 'x' FROM generate_series(1, %s) AS n RETURNING id",
        (prefix, count),
    ).fetchall()
    return [r[0] for r in rows]


def queue_notices(conn: psycopg.Connection, count: int, prefix: str = "user") -> list[int]:
    """`count` password-changed notices (no link) for fresh users; returns job ids."""
    add_users(conn, count, prefix)
    rows = conn.execute(
        "INSERT INTO email_jobs (template, recipient, user_id)"
        " SELECT 'password_changed', email, id FROM users WHERE email LIKE %s || '%%'"
        " ORDER BY id RETURNING id",
        (prefix,),
    ).fetchall()
    return [r[0] for r in rows]


def claim_one(pool: Any) -> ClaimedJob:
    """Claim the one due job, as a worker named "tester" would."""
    with pool.connection() as c:
        [job] = jobs.claim_batch(c, "tester", 1, lease_seconds=30)
    return job


def rendered_notice(settings: Settings, pool: Any, conn: psycopg.Connection) -> OutgoingEmail:
    """One password-changed notice, queued, claimed and rendered: what a mailer is given."""
    queue_notices(conn, 1)
    return renderer(settings).render(claim_one(pool))


def job_status(conn: psycopg.Connection, job_id: int) -> tuple[str, str | None, int]:
    row = conn.execute(
        "SELECT status, lease_owner, attempt_count FROM email_jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def events(conn: psycopg.Connection, job_id: int) -> list[tuple[str, str | None, int | None]]:
    """(event, lease_owner, attempt) of a job's trail, oldest first."""
    return [
        (r[0], r[1], r[2])
        for r in conn.execute(
            "SELECT event, lease_owner, attempt FROM email_job_events"
            " WHERE job_id = %s ORDER BY id",
            (job_id,),
        )
    ]


def expire_lease(conn: psycopg.Connection, job_id: int) -> None:
    """A lease that ran out, as the claim judges it (the database's clock), without waiting."""
    conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second' WHERE id = %s", (job_id,))


def expire_leases(conn: psycopg.Connection) -> int:
    """Every lease still held runs out now (a killed worker's, say); how many there were."""
    return conn.execute("UPDATE email_jobs SET lease_expires_at = now() - interval '1 second',"
                        " next_attempt_at = now() - interval '1 second'"
                        " WHERE lease_expires_at > now()").rowcount


def make_due(conn: psycopg.Connection, job_id: int) -> None:
    """Skip the backoff wait: the retry delay itself is asserted separately."""
    conn.execute("UPDATE email_jobs SET next_attempt_at = now() WHERE id = %s", (job_id,))


def authsvc_command() -> list[str]:
    script = Path(sys.executable).parent / "authsvc"
    return [str(script)] if script.exists() else [shutil.which("authsvc") or "authsvc"]


def start_worker_process(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`authsvc worker ARGS` as a real process with the test environment; logs go to `log`."""
    full_env = {**os.environ, **env}
    # A file, not a pipe: nobody drains a pipe while the test waits, and a
    # full pipe would block the worker.
    with log.open("ab") as sink:
        return subprocess.Popen(
            [*authsvc_command(), "worker", *args], env=full_env,
            stdout=sink, stderr=sink, cwd=log.parent,
        )


def stop_process(process: subprocess.Popen[bytes], timeout: float = 20.0) -> int:
    """SIGTERM, wait, and return the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    return process.wait(timeout=timeout)


def message_id_of(conn: psycopg.Connection, job_id: int, domain: str = "localhost") -> str:
    """The Message-ID the worker gives a job's email: it names the job by its public id."""
    return f"<authsvc-job-{public_id_of(conn, job_id)}@{domain}>"


def public_id_of(conn: psycopg.Connection, job_id: int) -> str:
    row = conn.execute("SELECT public_id FROM email_jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None and row[0] is not None
    return str(row[0])


def deliver_now(pool: object, deliverer: Delivery, mailer: Mailer, job: ClaimedJob,
                deadline: float = FAR) -> str:
    """One job the way a sender and the completer handle it, recorded at once.

    The event recorded, or "lease_lost" when a send's outcome found its lease gone.
    """
    outcome = deliverer.decide(mailer, job, deadline)
    with pool.connection() as conn:  # type: ignore[attr-defined]
        [recorded] = jobs.record_outcomes(conn, [outcome])
    return "lease_lost" if outcome.event == "sent" and not recorded else outcome.event


def sent_after_a_dropped_answer(conn: psycopg.Connection, pool: object, settings: Settings,
                                provider: Any, job_id: int) -> None:
    """`job_id` sent through `provider` (a running fake) whose first answer is lost: the
    first attempt ends `retry`, the next, made due at once, `sent`."""
    provider.fake.drop_next()
    deliverer = delivery(pool, settings, retry=RetryPolicy(base_seconds=0.01))
    mailer = provider.mailer()
    assert deliver_now(pool, deliverer, mailer, claim_one(pool)) == "retry"
    conn.execute("UPDATE email_jobs SET next_attempt_at = now() WHERE id = %s", (job_id,))
    assert deliver_now(pool, deliverer, mailer, claim_one(pool)) == "sent"


def deliver_once_to(database_url: str, settings: Settings, clock: Clock, smtp: Any,
                    to: str) -> Any:
    """Run the worker once; the newest message it delivered to `to` (a testkit Received)."""
    worker(database_url, settings, smtp.url, clock, once=True).run()
    return [m for m in smtp.messages if m.rcpt_tos == [to]][-1]


SAMPLE_PUBLIC_ID = UUID("0b7e6f1c-3d2a-4c5e-9f80-1a2b3c4d5e6f")
SAMPLE_APP_ID = UUID("5d0c3f4e-8a1b-4c2d-9e3f-0a1b2c3d4e5f")  # no such app: its brand is ours


def claimed_job(template: str, recipient: str, job_id: int = 41) -> ClaimedJob:
    """A job as a claim returns it, without a database: `verify` and `reset` carry a link
    (for an app's own account, so to its redirect URL, with a query to escape), any other
    template is a notice."""
    now = datetime.now(UTC)
    link = template in ("verify", "reset")
    return ClaimedJob(
        id=job_id, public_id=SAMPLE_PUBLIC_ID, template=template, recipient=recipient,
        payload={"redirect_url": "https://app.example/in?a=1&b=<2>"} if link else {},
        user_id=7 if link else None, purpose=template if link else None,
        token_version=3 if link else None, issued_at=now if link else None,
        attempt_count=1, lease_owner="h:1:x", lease_expires_at=now,
        current_version=3 if link else None, ambiguous_before=False,
        brand_app_id=SAMPLE_APP_ID if link else None,
    )
