"""The peers beside authsvc's worker: pgqueuer at its benchmark settings, and a raw psycopg loop.

pgqueuer (dev-only dependency) runs as its own tools/benchmark.py does: several
QueueManagers (consumers) in one asyncio process, each on its own connection,
dequeuing `batch` jobs at a time into a no-op entrypoint. The raw loop is the
limit PostgreSQL allows one Python process: claim 100 with SKIP LOCKED, mark
them in one statement.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import psycopg

from bench.common import queue_notices

N_RAW_BATCH = 100


def raw_drain(url: str, jobs: int, *, per_row: bool = False) -> float:
    """Jobs/s of a bare claim-100 + mark loop over authsvc's own email_jobs table."""
    queue_notices(url, jobs)
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        done = 0
        while True:
            with conn.transaction():
                ids = [r[0] for r in conn.execute(
                    "WITH due AS (SELECT id FROM email_jobs WHERE status = 'pending'"
                    "  AND next_attempt_at <= now() ORDER BY next_attempt_at, id"
                    "  LIMIT %s FOR UPDATE SKIP LOCKED)"
                    " UPDATE email_jobs SET lease_owner = 'raw', attempt_count = attempt_count + 1"
                    " WHERE id = ANY (ARRAY(SELECT id FROM due)) RETURNING id",
                    (N_RAW_BATCH,),
                )]
            if not ids:
                break
            if per_row:
                for job_id in ids:
                    conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = now(),"
                                 " lease_owner = NULL WHERE id = %s", (job_id,))
            else:
                conn.execute("UPDATE email_jobs SET status = 'sent', sent_at = now(),"
                             " lease_owner = NULL WHERE id = ANY (%s)", (ids,))
            done += len(ids)
        elapsed = time.perf_counter() - started
    assert done == jobs, (done, jobs)
    return jobs / elapsed


async def _pgqueuer_drain(url: str, jobs: int, consumers: int, batch: int, driver: str) -> float:
    from pgqueuer import Queries, QueueManager
    from pgqueuer.db import AsyncpgDriver, PsycopgDriver

    async def connect():  # type: ignore[no-untyped-def]
        if driver == "asyncpg":
            import asyncpg

            return AsyncpgDriver(await asyncpg.connect(url)), None
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        return PsycopgDriver(conn), conn

    setup_driver, setup_conn = await connect()
    queries = Queries(setup_driver)
    await queries.install()
    # Enqueue in chunks, as its benchmark's enqueue side does in batches.
    for start in range(0, jobs, 1000):
        n = min(1000, jobs - start)
        await queries.enqueue(["bench"] * n, [None] * n, [0] * n)
    managers: list[QueueManager] = []
    handled = 0
    finished = asyncio.Event()
    for _ in range(consumers):
        drv, _conn = await connect()
        qm = QueueManager(Queries(drv))

        @qm.entrypoint("bench")
        async def bench(_job: object) -> None:
            nonlocal handled
            handled += 1
            if handled >= jobs:
                finished.set()

        managers.append(qm)
    started = time.perf_counter()
    tasks = [
        asyncio.create_task(qm.run(batch_size=batch, dequeue_timeout=timedelta(seconds=1)))
        for qm in managers
    ]
    await asyncio.wait_for(finished.wait(), timeout=600)
    elapsed = time.perf_counter() - started
    for qm in managers:
        qm.shutdown.set()
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=60)
    if setup_conn is not None:
        await setup_conn.close()
    return jobs / elapsed


def pgqueuer_drain(url: str, jobs: int, *, consumers: int = 5, batch: int = 10,
                   driver: str = "psycopg") -> float:
    """Jobs/s for pgqueuer draining `jobs` no-op jobs (its benchmark: 5 consumers x batch 10)."""
    return asyncio.run(_pgqueuer_drain(url, jobs, consumers, batch, driver))
