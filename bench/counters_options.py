"""Three ways to keep the outbox figures cheap at 10 million rows, measured side by side.

One database of BIG retained jobs (what an outbox that is never pruned
keeps: mostly sent, a few superseded, expired and failed) and PENDING due
ones. For each option, the worker's two hot statements at BATCH jobs
(claim_batch, then record_outcomes marking them sent; rolled back, so every
round sees the same table) and the /metrics outbox section:

  a. triggers: statement-level triggers with transition tables append
     deltas for every writer (what migrations 0011-0017 left; the bench
     creates them from bench/counter_triggers.sql, and runs the statements
     without their own counting);
  b. explicit deltas: the claim and record statements append their own
     deltas in one more CTE (pgqueuer's log-then-aggregate), as shipped
     since migrations/0024;
  c. nothing written: pending, due, leased, oldest and failed counted live
     over partial indexes, the large final states estimated from the
     planner's statistics, sends and latencies left to the worker's own
     Prometheus counters.

Options run in turns, in blocks (the first round of each block warms its
plans and is dropped), so a noisy moment slows all three; a and c run with
session_replication_role = replica where the triggers must not fire. The
scrape is timed as 0011 did it (fold, then read) and as 0024 does (read,
adding what is not folded yet), with the deltas a second or 15 s of a
10,000 jobs/s drain at batch 100 leaves waiting (a claim writes one row,
an outcome statement of sends four), and option c's query.

Run:  .venv/bin/python -m bench.counters_options [--big 10000000] [--batch 100]
Prints the table and keeps it in bench/results/counters_options.json.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import psycopg

from authsvc.observability.metrics import LATENCY_BOUNDS
from authsvc.outbox.admin import fold_counters, live_outbox_stats, outbox_figures
from authsvc.worker import jobs
from bench.common import RESULTS, bench_server, fill_finished_jobs, fresh_database, percentile

PENDING = 400
ROUNDS = 120
BLOCKS = 6
DRAIN_PER_SECOND = 10_000  # jobs/s whose deltas wait for a scrape: batch claims + outcomes


def _fill(conn: psycopg.Connection, retained: int) -> None:
    """`retained` final jobs (97 % sent, 2 % superseded, 0.9 % expired, 0.1 % failed)."""
    fill_finished_jobs(
        conn, retained,
        "CASE WHEN n %% 1000 < 970 THEN 'sent' WHEN n %% 1000 < 990 THEN 'superseded'"
        " WHEN n %% 1000 < 999 THEN 'expired' ELSE 'failed' END", PENDING)
    # Option c's exact count of failed jobs reads a partial index, as pending's does.
    conn.execute("CREATE INDEX IF NOT EXISTS email_jobs_failed ON email_jobs (id)"
                 " WHERE status = 'failed'")
    conn.execute("VACUUM ANALYZE email_jobs")
    with conn.transaction():
        for statement in triggers_before_0024():
            conn.execute(statement)  # type: ignore[arg-type]  # the bench's own file


TRIGGERS = Path(__file__).resolve().with_name("counter_triggers.sql")
_COUNTED = re.compile(r",\s*counted AS \(.*?\n\)\n(?=SELECT)", re.DOTALL)
_TRIGGER_DDL = re.compile(
    r"^CREATE (?:OR REPLACE )?FUNCTION \w+\(.*?\$\$;|^CREATE TRIGGER .*?;",
    re.DOTALL | re.MULTILINE)


def _without_counting(query: str) -> str:
    """A shipped statement without its `counted` CTE: what a and c run."""
    stripped, found = _COUNTED.subn("\n", query)
    assert found == 1, query[:80]
    return stripped


def triggers_before_0024() -> list[str]:
    """Option a: the trigger functions and triggers 0011-0017 left (0024 dropped them)."""
    return _TRIGGER_DDL.findall(TRIGGERS.read_text(encoding="utf-8"))


# a and c run the statements without their deltas; b as shipped.
_CLAIM_PLAIN = _without_counting(jobs.Q["claim_batch"])
_RECORD_PLAIN = _without_counting(jobs.Q["record_outcomes"])


# Option c's scrape: the live pending side (admin.sql outbox_stats' first CTE),
# failed by its partial index, the large states from pg_stats.
_SCRAPE_C = """
WITH live AS (
    SELECT count(*) AS pending,
           count(*) FILTER (WHERE outbox_job_due(status, next_attempt_at, lease_expires_at)) AS due,
           count(*) FILTER (WHERE outbox_job_leased(status, lease_expires_at)) AS leased,
           min(created_at) AS oldest
    FROM email_jobs WHERE status = 'pending'
), failed AS (
    SELECT count(*) AS failed FROM email_jobs WHERE status = 'failed'
), estimated AS (
    SELECT coalesce(jsonb_object_agg(m.status, round(m.freq * c.reltuples)), '{}') AS by_status
    FROM pg_class AS c, pg_stats AS s,
         unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS m(status, freq)
    WHERE c.oid = 'email_jobs'::regclass AND s.schemaname = current_schema()
      AND s.tablename = 'email_jobs' AND s.attname = 'status'
)
SELECT live.*, failed.failed, estimated.by_status FROM live, failed, estimated
"""

_TRIGGERS_OFF = "SET LOCAL session_replication_role = replica"  # no DDL: plans stay valid


def _claim_and_record(conn: psycopg.Connection, batch: int, option: str,
                      samples: dict[str, list[float]]) -> None:
    claim_sql = jobs.Q["claim_batch"] if option == "b" else _CLAIM_PLAIN
    record_sql = jobs.Q["record_outcomes"] if option == "b" else _RECORD_PLAIN
    with conn.transaction(force_rollback=True):
        if option != "a":
            conn.execute(_TRIGGERS_OFF)
        began = time.perf_counter()
        rows = conn.execute(claim_sql, {"batch": batch, "owner": "bench",
                                        "lease_seconds": 45.0}).fetchall()
        claimed = time.perf_counter()
        assert len(rows) == batch
        conn.execute(record_sql, {
            "job_ids": [r[0] for r in rows], "owners": ["bench"] * batch,
            "attempts": [r[9] for r in rows], "events": ["sent"] * batch,
            "provider_message_ids": [None] * batch, "errors": [None] * batch,
            "delays": [0.0] * batch, "lease_expires": [r[11] for r in rows],
            "token_versions": [r[7] for r in rows]})
        recorded = time.perf_counter()
        if option != "c":
            written = conn.execute("SELECT count(*) FROM outbox_counter_deltas").fetchone()
            assert written is not None and written[0] > 0, option
    samples["claim"].append((claimed - began) * 1000)
    samples["record"].append((recorded - claimed) * 1000)


def _waiting_deltas(conn: psycopg.Connection, statements: int) -> None:
    """What `statements` claims and as many outcome statements sending their jobs write."""
    conn.execute(
        "INSERT INTO outbox_counter_deltas (name, delta, seconds)"
        " SELECT d.name, d.delta, d.seconds FROM generate_series(1, %s) AS s,"
        " LATERAL (VALUES ('events_claimed', 100, 0::float8), ('jobs_sent', 100, 0),"
        "   ('events_sent', 100, 0), ('send_latency_bucket_0.5', 100, 0),"
        "   ('send_latency', 100, 42.0)) AS d(name, delta, seconds)",
        (statements,))


SCRAPES = {
    "fold_then_read": "fold, then read (0011: every scrape folded)",
    "fold_then_read_15s": "same, 15 s of deltas waiting",
    "read_1s": "read adding the unfolded deltas (0024), 1 s of deltas waiting",
    "read_15s": "same, 15 s of deltas waiting",
    "c": "c: live small sets and estimates",
}


def _scrape(conn: psycopg.Connection, how: str, statements: int) -> float:
    with conn.transaction(force_rollback=True):
        if statements:
            _waiting_deltas(conn, statements)
        began = time.perf_counter()
        if how == "c":
            conn.execute(_SCRAPE_C).fetchone()
        else:
            if how.startswith("fold"):
                fold_counters(conn)
            outbox_figures(conn, LATENCY_BOUNDS)
        return (time.perf_counter() - began) * 1000


def _figures(samples: list[float]) -> dict[str, float]:
    # On a shared machine the least a statement took is its own cost, best.
    return {"p50_ms": round(percentile(samples, 0.5), 3),
            "p95_ms": round(percentile(samples, 0.95), 3), "min_ms": round(min(samples), 3)}


def run(big: int, batch: int) -> dict[str, Any]:
    results: dict[str, Any] = {"big": big, "batch": batch, "pending": PENDING}
    second = DRAIN_PER_SECOND // batch  # claims (and outcome statements) in a second
    backlog = {"fold_then_read": 0, "fold_then_read_15s": 15 * second, "read_1s": second,
               "read_15s": 15 * second, "c": 0}
    with bench_server() as server, fresh_database(server) as url, \
            psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        began = time.perf_counter()
        _fill(conn, big)
        results["fill_seconds"] = round(time.perf_counter() - began, 1)
        size = conn.execute("SELECT pg_total_relation_size('email_jobs')").fetchone()
        results["table_mb"] = round(size[0] / 2**20) if size else 0
        options = ("a", "b", "c")
        hot: dict[str, dict[str, list[float]]] = {o: {"claim": [], "record": []} for o in options}
        scrapes: dict[str, list[float]] = {how: [] for how in SCRAPES}
        per_block = ROUNDS // BLOCKS
        for block in range(BLOCKS):
            # What autovacuum would have done meanwhile: each rolled-back round
            # leaves dead rows (and index entries) that later rounds would scan.
            conn.execute("VACUUM email_jobs, email_job_events, outbox_counter_deltas")
            for option in options:
                _claim_and_record(conn, batch, option, {"claim": [], "record": []})  # warm-up
                for _ in range(per_block):
                    _claim_and_record(conn, batch, option, hot[option])
            for how, statements in backlog.items():
                conn.execute("VACUUM outbox_counter_deltas")
                _scrape(conn, how, statements)  # warm-up
                for _ in range(per_block // 2):
                    scrapes[how].append(_scrape(conn, how, statements))
            print(f"block {block + 1}/{BLOCKS} done", flush=True)
        for option in options:
            results[option] = {"claim": _figures(hot[option]["claim"]),
                               "record": _figures(hot[option]["record"])}
        results["scrapes"] = {how: _figures(samples) for how, samples in scrapes.items()}
        live: list[float] = []
        for _ in range(3):
            start = time.perf_counter()
            live_outbox_stats(conn)
            live.append((time.perf_counter() - start) * 1000)
        results["count_every_row_ms"] = round(percentile(live, 0.5), 1)
    return results


NAMES = {
    "a": "a. triggers (0011-0017)",
    "b": "b. deltas written by the statements (0024)",
    "c": "c. nothing written: live small sets, estimates, worker counters",
}


def table(r: dict[str, Any]) -> str:
    none = r["c"]
    lines = [
        f"{r['big']:,} retained jobs ({r['table_mb']:,} MB with indexes), {r['pending']}"
        f" pending; batch {r['batch']}; ms, p50 (least). Counting every row instead:"
        f" {r['count_every_row_ms']:,} ms.",
        "",
        "| option | claim_batch | record_outcomes | added to claim + record, p50 (least) |",
        "|---|---|---|---|",
    ]
    for option in ("a", "b", "c"):
        o = r[option]
        added = {k: o["claim"][k] + o["record"][k] - none["claim"][k] - none["record"][k]
                 for k in ("p50_ms", "min_ms")}
        lines.append(
            f"| {NAMES[option]} | {o['claim']['p50_ms']:.2f} ({o['claim']['min_ms']:.2f}) |"
            f" {o['record']['p50_ms']:.2f} ({o['record']['min_ms']:.2f}) |"
            f" {added['p50_ms']:+.2f} ({added['min_ms']:+.2f}) |")
    lines += ["", "| /metrics outbox section | p50 (least) ms |", "|---|---|"]
    for how, label in SCRAPES.items():
        f = r["scrapes"][how]
        lines.append(f"| {label} | {f['p50_ms']:.2f} ({f['min_ms']:.2f}) |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.counters_options",
                                     description=__doc__)
    parser.add_argument("--big", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    results = run(args.big, args.batch)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "counters_options.json").write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
