"""Enqueue → start: how long a job waits before an idle worker takes it up, beside pgqueuer.

Both are fed the same open-loop load (one job per transaction, `rate` a
second) on the same server, and both wake on LISTEN/NOTIFY. "Start" is when
the job's own code is about to run, as each system shows it:

- authsvc: the `claimed` log line's timestamp (written right after the claim
  returned, before any send; millisecond resolution), the worker run as
  `authsvc worker` with its logs going to a file as deployed;
- pgqueuer: the entrypoint's first statement.

Each is measured from the job row's creation time (the enqueuing
transaction's `now()`), so both figures include the commit and the
notification.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from authsvc.outbox import enqueue_email
from bench.common import authsvc_script, percentile, worker_env
from bench.drain import queue_links

RATE = 20.0
SAMPLES = 300


def _figures(samples: list[float]) -> dict[str, Any]:
    return {"samples": len(samples), "rate": RATE, "p50_ms": percentile(samples, 0.5),
            "p95_ms": percentile(samples, 0.95), "max_ms": max(samples)}


def _paced(count: int, enqueue: Any) -> None:
    started = time.perf_counter()
    for i in range(count):
        pause = started + i / RATE - time.perf_counter()
        if pause > 0:
            time.sleep(pause)  # pacing the open-loop load, not waiting for a result
        enqueue(i)


def authsvc(url: str) -> dict[str, Any]:
    """p50/p95 from a reset link's creation to its `claimed` line, idle `authsvc worker`."""
    queue_links(url, SAMPLES + 1, queued=False)  # the accounts; their jobs come one by one
    with tempfile.TemporaryDirectory() as data:
        log = Path(data, "worker.log")
        with log.open("w") as stderr:
            worker = subprocess.Popen(
                [authsvc_script(), "worker", "--poll-seconds", "30"],
                env=worker_env(url, "null://", data), stderr=stderr)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                users: dict[str, int] = dict(
                    conn.execute("SELECT email, id FROM users").fetchall())

                def enqueue(i: int) -> None:
                    email = f"r{i + 1}@example.com"
                    with conn.transaction():  # the row and its NOTIFY, as the API commits them
                        enqueue_email(conn, template="reset", recipient=email,
                                      user_id=users[email], purpose="reset", token_version=0,
                                      issued_at=datetime.now(UTC).replace(microsecond=0))

                enqueue(SAMPLES)  # warm-up: also waits for the worker to start
                _wait_sent(conn, 1)
                warm_up = conn.execute("SELECT id FROM email_jobs").fetchone()
                _paced(SAMPLES, enqueue)
                _wait_sent(conn, SAMPLES + 1)
                created: dict[int, datetime] = dict(
                    conn.execute("SELECT id, created_at FROM email_jobs").fetchall())
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
        claimed = [json.loads(line) for line in log.read_text().splitlines()
                   if '"event":"claimed"' in line]
    samples = [(datetime.fromisoformat(c["ts"]) - created[c["job_id"]]).total_seconds() * 1000
               for c in claimed if warm_up is None or c["job_id"] != warm_up[0]]
    return _figures(samples)


def _wait_sent(conn: psycopg.Connection, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute("SELECT count(*) FROM email_jobs WHERE status = 'sent'").fetchone()
        if row is not None and row[0] >= count:
            return
        time.sleep(0.05)
    raise TimeoutError(f"fewer than {count} jobs sent in {timeout:.0f} s")


async def _pgqueuer(url: str) -> list[float]:
    from pgqueuer import Queries, QueueManager
    from pgqueuer.db import PsycopgDriver

    setup = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await Queries(PsycopgDriver(setup)).install()
    consumer = await psycopg.AsyncConnection.connect(url, autocommit=True)
    manager = QueueManager(Queries(PsycopgDriver(consumer)))
    samples: list[float] = []
    done = asyncio.Event()

    @manager.entrypoint("bench")
    async def started(job: Any) -> None:
        samples.append((time.time() - job.created.timestamp()) * 1000)
        if len(samples) >= SAMPLES + 1:
            done.set()

    task = asyncio.create_task(manager.run(batch_size=10))
    producer = await psycopg.AsyncConnection.connect(url, autocommit=True)
    queries = Queries(PsycopgDriver(producer))
    await queries.enqueue(["bench"], [None], [0])  # warm-up
    began = time.perf_counter()
    for i in range(SAMPLES):
        pause = began + i / RATE - time.perf_counter()
        if pause > 0:
            await asyncio.sleep(pause)
        await queries.enqueue(["bench"], [None], [0])
    await asyncio.wait_for(done.wait(), timeout=60)
    manager.shutdown.set()
    await asyncio.wait_for(task, timeout=30)
    for conn in (setup, consumer, producer):
        await conn.close()
    return samples[1:]


def pgqueuer(url: str) -> dict[str, Any]:
    """p50/p95 from a job's creation to its entrypoint, one idle QueueManager."""
    return _figures(asyncio.run(_pgqueuer(url)))
