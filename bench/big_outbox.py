"""A big outbox: claim, enqueue and outbox stats at 10M retained rows vs a small table.

Two databases on one throwaway server: SMALL and BIG retained jobs (sent,
failed, superseded, expired: what an outbox that is never pruned keeps),
each with the same 200 pending jobs due. For each: claim_batch of 32, a
claim of 32 recorded sent, and an enqueue_email, all rolled back (so every
round sees the same table), the operator's `outbox stats`, the /metrics
outbox section and the pre-0011 count of every row, each timed over ROUNDS
rounds (p50 / p95). Then prune: the shipped single DELETE against a batched
DELETE of PRUNE_BATCH rows per transaction, each batch a short lock.

Run:  .venv/bin/python -m bench.big_outbox [--big 10000000]
Prints the figures, keeps them in bench/results/big_outbox.json, and
replaces the "Big outbox" section of docs/BENCHMARKS.md (other sections kept).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry, generate_latest

from authsvc.observability.metrics import LATENCY_BOUNDS, OutboxCollector
from authsvc.outbox import enqueue_email
from authsvc.outbox.admin import PRUNE_BATCH, live_outbox_stats, outbox_figures, outbox_stats
from authsvc.outbox.admin import Q as ADMIN_Q
from authsvc.worker import jobs
from bench.common import (
    RESULTS,
    bench_server,
    fill_finished_jobs,
    fresh_database,
    kept_doc_section,
    percentile,
    with_doc_section,
    write_doc_section,
)

SMALL = 10_000
PENDING = 200
ROUNDS = 30
SECTION = "## Big outbox (issue 15)"


def _fill(conn: psycopg.Connection, retained: int) -> None:
    """`retained` finished jobs, oldest first, then PENDING due ones."""
    fill_finished_jobs(conn, retained, "(ARRAY['sent','sent','sent','sent','sent','sent',"
                       "'sent','failed','superseded','expired'])[1 + n %% 10]", PENDING)
    conn.execute("VACUUM ANALYZE email_jobs")


def _timed(action: Callable[[], Any], rounds: int = ROUNDS) -> dict[str, float]:
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        action()
        samples.append((time.perf_counter() - began) * 1000)
    return {"p50_ms": percentile(samples, 0.5), "p95_ms": percentile(samples, 0.95)}


def metrics_outbox_text(conn: psycopg.Connection) -> bytes:
    """The /metrics outbox section as a scrape builds it: read, families, text."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(OutboxCollector(lambda: outbox_figures(conn, LATENCY_BOUNDS)))
    return generate_latest(registry)


def _measure(conn: psycopg.Connection) -> dict[str, dict[str, float]]:
    def claim() -> None:
        with conn.transaction(force_rollback=True):
            assert len(jobs.claim_batch(conn, "bench", 32, 45)) == 32

    def enqueue() -> None:
        with conn.transaction(force_rollback=True):
            enqueue_email(conn, template="password_changed", recipient="new@example.com")

    def outcomes() -> None:
        # The worker's other statement: claim 32 and record them sent (rolled back).
        with conn.transaction(force_rollback=True):
            claimed = jobs.claim_batch(conn, "bench", 32, 45)
            conn.execute(jobs.Q["record_outcomes"], {
                "job_ids": [j.id for j in claimed], "owners": [j.lease_owner for j in claimed],
                "attempts": [j.attempt_count for j in claimed], "events": ["sent"] * 32,
                "provider_message_ids": [None] * 32, "errors": [None] * 32,
                "delays": [0.0] * 32, "lease_expires": [j.lease_expires_at for j in claimed],
                "token_versions": [j.token_version for j in claimed]})

    def stats_exact() -> None:
        # Stats and the counters must agree with a count of every row (checked once per round).
        # (oldest_pending_seconds aside: each query has its own now()).
        fast, live = outbox_stats(conn), live_outbox_stats(conn)
        assert replace(fast, oldest_pending_seconds=0) == replace(live, oldest_pending_seconds=0)

    _timed(stats_exact, rounds=1)
    return {"claim_batch_32": _timed(claim), "claim_and_record_32": _timed(outcomes),
            "enqueue": _timed(enqueue),
            "outbox_stats": _timed(lambda: outbox_stats(conn)),
            "metrics_outbox": _timed(lambda: metrics_outbox_text(conn)),
            "live_count_before_0011": _timed(lambda: live_outbox_stats(conn), rounds=5)}


def _prune(conn: psycopg.Connection, rows: int) -> dict[str, float]:
    """`authsvc outbox prune`'s batched query over the oldest `rows` jobs, batch by batch."""
    # _fill dates job n at 400 days ago + n seconds: this cutoff takes jobs 1..rows.
    older_than = 400 * 86400 - rows
    batches, longest, deleted = 0, 0.0, 0
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        with conn.transaction():
            row = conn.execute(ADMIN_Q["prune_jobs"], {"older_than_seconds": older_than,
                                                       "batch": PRUNE_BATCH}).fetchone()
        done = int(row[0]) if row else 0
        longest = max(longest, time.perf_counter() - start)
        deleted += done
        batches += 1
        if done < PRUNE_BATCH:
            break
    seconds = time.perf_counter() - began
    return {"rows": deleted, "batches": batches, "seconds": round(seconds, 1),
            "rows_per_second": round(deleted / seconds), "longest_batch_ms": longest * 1000}


def _single_delete(conn: psycopg.Connection, rows: int) -> dict[str, float]:
    """`outbox prune` as first written: one DELETE, one transaction, every row locked at once."""
    cutoff = conn.execute(
        "SELECT created_at FROM email_jobs WHERE status <> 'pending' ORDER BY created_at"
        " OFFSET %s LIMIT 1", (rows,)
    ).fetchone()
    assert cutoff is not None
    began = time.perf_counter()
    with conn.transaction():
        deleted = conn.execute(
            "DELETE FROM email_jobs WHERE status IN ('sent','failed','superseded','expired')"
            " AND created_at < %s", (cutoff[0],)
        ).rowcount
    return {"rows": deleted, "transaction_ms": (time.perf_counter() - began) * 1000}


def run(big: int) -> dict[str, Any]:
    results: dict[str, Any] = {"small": SMALL, "big": big, "pending": PENDING}
    with bench_server() as server:
        for label, size in (("small", SMALL), ("big", big)):
            with fresh_database(server) as url, psycopg.connect(url, autocommit=True) as conn:
                began = time.perf_counter()
                _fill(conn, size)
                results[f"{label}_fill_seconds"] = round(time.perf_counter() - began, 1)
                results[f"{label}_table_mb"] = round(conn.execute(
                    "SELECT pg_total_relation_size('email_jobs')").fetchone()[0] / 2**20)  # type: ignore[index]
                results[label + "_ops"] = _measure(conn)
                if label == "big":
                    prune_rows = min(1_000_000, big // 10)
                    results["prune_batched"] = _prune(conn, prune_rows)
                    results["prune_single"] = _single_delete(conn, prune_rows)
    return results


def section(r: dict[str, Any], command: str) -> str:
    small, big = r["small_ops"], r["big_ops"]
    lines = [
        SECTION, "",
        f"`{command}`: {r['small']:,} vs {r['big']:,} retained jobs (sent/failed/superseded/"
        f"expired, no trail rows), {r['pending']} pending due in each; table with indexes"
        f" {r['small_table_mb']} MB vs {r['big_table_mb']:,} MB. Claim and enqueue are rolled"
        " back each round, so every round sees the same table.", "",
        "| operation | small p50 ms | big p50 ms | big p95 ms | big / small | within 1.5x |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("claim_batch_32", "claim_and_record_32", "enqueue", "outbox_stats",
                 "metrics_outbox", "live_count_before_0011"):
        ratio = big[name]["p50_ms"] / max(small[name]["p50_ms"], 1e-6)
        lines.append(f"| {name} | {small[name]['p50_ms']:.2f} | {big[name]['p50_ms']:.2f} |"
                     f" {big[name]['p95_ms']:.2f} | {ratio:.1f}x |"
                     f" {'yes' if ratio <= 1.5 else '**no**'} |")
    pb, ps = r["prune_batched"], r["prune_single"]
    lines += [
        "",
        f"Prune of the oldest {pb['rows']:,} finished jobs: in {pb['batches']} batches of"
        f" {PRUNE_BATCH:,} ({pb['rows_per_second']:,} rows/s, longest batch — the longest"
        f" any row lock is held — {pb['longest_batch_ms']:.0f} ms; `authsvc outbox prune`"
        f" now runs exactly this), against one DELETE of the next {ps['rows']:,} as it ran"
        f" before: one transaction of {ps['transaction_ms'] / 1000:.1f} s holding every"
        " deleted row's lock.", "",
        "`outbox stats` and the /metrics outbox section (gauges, event counters, latency"
        " histogram) count pending-side figures live over the pending rows only and read"
        " final-state counts, event totals and the histogram from counters that the"
        " claim, outcome, redrive and prune statements write themselves (migrations/0024;"
        " each round asserts they equal a count of every row). live_count_before_0011 is"
        " the old query, a count of every retained row, for comparison."
        " claim_and_record_32 is the worker's hot path, counting included: claim 32 and"
        " record them sent. The counters' options side by side: docs/worker.md,"
        " \"Counters: the options measured\".", "",
    ]
    return "\n".join(lines)


def with_section(document: str, text: str) -> str:
    """`document` with this section replaced (or appended); every other section as it was."""
    return with_doc_section(document, SECTION, text)


def kept_section(document: str) -> str | None:
    """This section of an existing BENCHMARKS.md, for bench/suite.py to carry over."""
    return kept_doc_section(document, SECTION)


def write_section(text: str) -> None:
    write_doc_section(SECTION, text)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.big_outbox", description=__doc__)
    parser.add_argument("--big", type=int, default=10_000_000)
    args = parser.parse_args()
    results = run(args.big)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "big_outbox.json").write_text(json.dumps(results, indent=1))
    suffix = "" if args.big == 10_000_000 else f" --big {args.big}"
    command = "python -m bench.big_outbox" + suffix
    text = section(results, command)
    print(text)
    write_section(text)


if __name__ == "__main__":
    main()
