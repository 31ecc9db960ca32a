"""A short look at the claim over link jobs: the statement alone, then the mechanics drain.

Run: .venv/bin/python -m bench.mechanics [--rounds 3] [--jobs 20000]

Minutes, not the suite's ten: for a change to the claim statement, before and
after. The statement is claim_batch over 100 due link jobs (reset and verify,
each checking its account's current version), timed in a rolled-back
transaction; the drain is bench.drain.mechanics_drain (the real Worker, no
rendering, a no-op mailer) at --concurrency 2 --batch 100, best of the rounds.
"""

from __future__ import annotations

import argparse
import time

import psycopg

from authsvc.worker.jobs import Q
from bench import drain
from bench.common import bench_server, fresh_database, percentile, report

CLAIMS = 300
BATCH = 100


def claim_samples(url: str, jobs: int) -> list[float]:
    """Milliseconds per claim_batch(100) of link jobs, each rolled back."""
    drain.queue_links(url, jobs)
    params = {"owner": "bench", "batch": BATCH, "lease_seconds": 45}
    samples = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(CLAIMS):
            with conn.transaction(force_rollback=True):
                started = time.perf_counter()
                conn.execute(Q["claim_batch"], params).fetchall()
                samples.append((time.perf_counter() - started) * 1000)
    return samples[CLAIMS // 10:]  # the first ones plan and warm the cache


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mechanics")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20_000)
    args = parser.parse_args()
    claims: list[float] = []
    rates: list[float] = []
    with bench_server() as base:
        for _round in range(args.rounds):
            with fresh_database(base) as url:
                claims += claim_samples(url, args.jobs)
            with fresh_database(base) as url:
                rates.append(drain.mechanics_drain(url, args.jobs, concurrency=2, batch=BATCH,
                                                   logs=False))
    report("mechanics", [
        f"claim_batch({BATCH}) of link jobs, {args.jobs:,} due, {len(claims)} claims:"
        f" p50 {percentile(claims, 0.5):.2f} ms, p95 {percentile(claims, 0.95):.2f} ms",
        f"mechanics drain, {args.jobs:,} link jobs, --concurrency 2 --batch {BATCH}, logs off:"
        f" best {max(rates):,.0f} jobs/s of {', '.join(f'{r:,.0f}' for r in rates)}",
    ])


if __name__ == "__main__":
    main()
