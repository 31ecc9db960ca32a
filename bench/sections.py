"""The measurements of `make bench` other than drains: latency, slow sink, claims, HTTP, RSS."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import psutil
import psycopg

from authsvc.apps.keys import register_app
from authsvc.cli.serve import gunicorn_argv
from authsvc.outbox import enqueue_email
from authsvc.worker import jobs
from bench.common import authsvc_script, percentile, worker_env
from bench.drain import queue_links
from testkit.smtp_double import SmtpDouble
from testkit.waiting import free_port, wait_until_ready

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def latency(url: str, rate: float = 20.0, seconds: float = 15.0) -> dict[str, Any]:
    """Commit -> SMTP acceptance at `rate` requests/s, one email per commit, idle worker."""
    committed: dict[str, float] = {}
    with SmtpDouble() as smtp, tempfile.TemporaryDirectory() as data:
        worker = subprocess.Popen([authsvc_script(), "worker", "--poll-seconds", "30"],
                                  env=worker_env(url, smtp.url, data), stderr=subprocess.DEVNULL)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                with conn.transaction():  # warm-up: also waits for the worker to start
                    enqueue_email(conn, template="password_changed", recipient="w@example.com")
                smtp.wait_for(1, timeout=60)
                count = int(rate * seconds)
                started = time.perf_counter()
                for i in range(count):
                    due = started + i / rate
                    pause = due - time.perf_counter()
                    if pause > 0:
                        time.sleep(pause)  # pacing the open-loop load, not waiting for a result
                    with conn.transaction():
                        job_id = enqueue_email(conn, template="password_changed",
                                               recipient=f"u{i}@example.com")
                        # Mail names the job by its public id; read before the commit,
                        # which the clock below starts from.
                        public_id = conn.execute("SELECT public_id FROM email_jobs WHERE id = %s",
                                                 (job_id,)).fetchone()[0]  # type: ignore[index]
                    committed[f"<authsvc-job-{public_id}@localhost>"] = time.time()
                messages = smtp.wait_for(count + 1, timeout=60)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    samples = [(m.received_at - committed[m.message_id]) * 1000
               for m in messages if m.message_id in committed]
    return {"samples": len(samples), "rate": rate, "p50_ms": percentile(samples, 0.5),
            "p95_ms": percentile(samples, 0.95), "p99_ms": percentile(samples, 0.99),
            "max_ms": max(samples)}


def slow_sink(url: str, concurrency: int, send_seconds: float = 0.2,
              seconds: float = 4.0) -> dict[str, Any]:
    """Emails/s when each SMTP send takes `send_seconds`, against concurrency / send_seconds."""
    count = max(10, int(concurrency / send_seconds * seconds))
    batch = max(10, concurrency)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO email_jobs (template, recipient)"
                     " SELECT 'password_changed', 'u' || n || '@example.com'"
                     " FROM generate_series(1, %s) n", (count,))
    with SmtpDouble(delay_seconds=send_seconds) as smtp, tempfile.TemporaryDirectory() as data:
        subprocess.run(
            [authsvc_script(), "worker", "--once", "--concurrency", str(concurrency),
             "--batch", str(batch)],
            env=worker_env(url, smtp.url, data), stderr=subprocess.DEVNULL, check=True,
            timeout=300,
        )
        messages = smtp.wait_for(count, timeout=30)
    received = sorted(m.received_at for m in messages)
    # From the start of the first send (its acceptance less one send) to the last acceptance.
    rate = count / (received[-1] - received[0] + send_seconds)
    ideal = concurrency / send_seconds
    return {"concurrency": concurrency, "batch": batch, "emails": count, "rate": rate,
            "ideal": ideal, "of_ideal": rate / ideal}


def _claim_samples(conn: psycopg.Connection, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        with conn.transaction(force_rollback=True):  # keep the table as it is
            began = time.perf_counter()
            claimed = jobs.claim_batch(conn, "bench:0:claim", 32, 45)
            samples.append((time.perf_counter() - began) * 1000)
        assert len(claimed) == 32
    return samples


CLAIM_BLOCKS, CLAIMS_PER_BLOCK = 10, 20  # each big case beside the reference (below)


def _beside_reference(conn: psycopg.Connection, reference: psycopg.Connection
                      ) -> tuple[list[float], list[float]]:
    """Claims on `conn` and on the 1k-pending reference, in alternating blocks.

    A noisy second on this shared machine then slows both sides alike
    instead of one case: measured one after the other, the p50 of a case
    moved by up to 0.7 ms (a third of it) between runs of the same code.
    Both tables start vacuumed (every claim is rolled back, but its row
    versions stay), and the two take turns going first.
    """
    for side in (conn, reference):
        side.execute("VACUUM email_jobs")
    case: list[float] = []
    ref: list[float] = []
    for block in range(CLAIM_BLOCKS):
        turns = [(reference, ref), (conn, case)]
        for side, samples in turns if block % 2 == 0 else turns[::-1]:
            samples += _claim_samples(side, CLAIMS_PER_BLOCK)
    return case, ref


def _plan(conn: psycopg.Connection) -> list[str]:
    params = {"owner": "bench:0:plan", "batch": 32, "lease_seconds": 45}
    with conn.transaction(force_rollback=True):
        rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "
                            + jobs.Q["claim_batch"], params).fetchall()
    return [r[0] for r in rows]


def _queue_due(conn: psycopg.Connection, first: int, last: int) -> None:
    conn.execute(
        "INSERT INTO email_jobs (template, recipient, next_attempt_at)"
        " SELECT 'password_changed', 'u' || n || '@example.com',"
        "        now() - interval '1 day' + n * interval '1 ms'"
        " FROM generate_series(%s::integer, %s::integer) n", (first, last))
    conn.execute("VACUUM ANALYZE email_jobs")


def claim_latency(url_reference: str, url_pending: str, url_retained: str) -> dict[str, Any]:
    """claim_batch(32) p50/p95 at 1k pending, and at 100k, 1M pending and 1k beside 1M sent.

    Each big case is measured beside the 1k-pending reference (its own
    database), in alternating blocks; its ratio is to the reference's p50
    from those same blocks.
    """
    results: dict[str, Any] = {"cases": [], "plans": {}}

    def add(case: str, samples: list[float], ref: list[float] | None = None) -> None:
        row: dict[str, Any] = {"case": case, "p50_ms": percentile(samples, 0.5),
                               "p95_ms": percentile(samples, 0.95)}
        if ref is not None:
            row["reference_p50_ms"] = percentile(ref, 0.5)
            row["ratio"] = row["p50_ms"] / row["reference_p50_ms"]
        results["cases"].append(row)

    with psycopg.connect(url_reference, autocommit=True) as reference, \
            psycopg.connect(url_pending, autocommit=True) as conn:
        _queue_due(reference, 1, 1_000)
        add("1,000 pending", _claim_samples(reference, CLAIM_BLOCKS * CLAIMS_PER_BLOCK))
        results["plans"]["1,000 pending"] = _plan(reference)
        have = 0
        for target in (100_000, 1_000_000):
            _queue_due(conn, have + 1, target)
            have = target
            add(f"{target:,} pending", *_beside_reference(conn, reference))
        results["plans"]["1,000,000 pending"] = _plan(conn)
        with psycopg.connect(url_retained, autocommit=True) as kept:
            kept.execute(
                "INSERT INTO email_jobs (template, recipient, status, sent_at, created_at,"
                " next_attempt_at) SELECT 'password_changed', 's' || n || '@example.com', 'sent',"
                " now() - n * interval '1 ms', now() - n * interval '1 ms',"
                " now() - n * interval '1 ms' FROM generate_series(1, 1000000) n")
            kept.execute("INSERT INTO email_job_events (job_id, event, attempt)"
                         " SELECT id, 'sent', 1 FROM email_jobs")
            kept.execute("INSERT INTO email_jobs (template, recipient)"
                         " SELECT 'password_changed', 'u' || n || '@example.com'"
                         " FROM generate_series(1, 1000) n")
            kept.execute("VACUUM ANALYZE")
            case = "1,000 pending + 1,000,000 sent kept (and their trail)"
            add(case, *_beside_reference(kept, reference))
            results["plans"][case] = _plan(kept)
    return results


def _serve(argv: list[str], env: dict[str, str], port: int, log: Any) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=log, cwd=ROOT)
    # The ceiling app has no /readyz: its 404 says it is up.
    wait_until_ready(f"http://127.0.0.1:{port}/readyz", server, ready=lambda s: s in (200, 404))
    return server


def _load(port: int, path: str, key: str, concurrency: int, seconds: float,
          warmup: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.http_load", str(port), path, key, str(concurrency),
         str(seconds), str(warmup)], capture_output=True, check=True,
        timeout=warmup + seconds + 120, cwd=ROOT)
    return json.loads(done.stdout)


def http_resets(url: str, concurrency: int = 16, seconds: float = 10.0,
                rounds: int = 1) -> dict[str, Any]:
    """POST /api/v1/password-resets and /sign-in-links under `authsvc serve`, beside the
    one-INSERT ceiling.

    Both servers run side by side and the three endpoints take turns,
    `rounds` times (the two link requests on the one authsvc server); each
    endpoint's figures are its best run's (by req/s), and every run is kept.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_ceiling (id bigint GENERATED ALWAYS AS IDENTITY"
                     " PRIMARY KEY, email text NOT NULL, created_at timestamptz DEFAULT now())")
        with conn.transaction():
            _registered, key = register_app(conn, "bench", ["http://127.0.0.1/"])
    # name, server, path: a server named None is `authsvc serve`, else the WSGI app to run.
    apps = {"authsvc": None, "ceiling": "bench.ceiling:create_app()"}
    endpoints = (("resets", "authsvc", "/api/v1/password-resets"),
                 ("sign_ins", "authsvc", "/api/v1/sign-in-links"),
                 ("ceiling", "ceiling", "/ceiling"))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _server, _path in endpoints}
    with tempfile.TemporaryDirectory() as data, open(os.devnull, "wb") as sink, \
            contextlib.ExitStack() as servers:
        env = {**worker_env(url, "null://", data), "AUTHSVC_RATE_LIMIT_IP": "100000000/1m",
               "AUTHSVC_RATE_LIMIT_APP": "100000000/1m", "AUTHSVC_RATE_LIMIT_EMAIL": "1000/1m"}
        ports = {}
        for name, app in apps.items():
            port = ports[name] = free_port()
            if app is None:
                argv = [authsvc_script(), "serve", "--bind", f"127.0.0.1:{port}"]
            else:
                argv = gunicorn_argv(f"127.0.0.1:{port}", 2, 16)
                argv[-1] = app
            servers.enter_context(_stopping(_serve(argv, env, port, sink)))
        for _round in range(rounds):
            for name, server, path in endpoints:
                runs[name].append(_load(ports[server], path, key, concurrency, seconds,
                                        warmup=2.0))
    out: dict[str, Any] = {"concurrency": concurrency, "runs": runs}
    for name in runs:
        out[name] = max(runs[name], key=lambda run: run["rps"])
    out["ratio"] = out["resets"]["rps"] / out["ceiling"]["rps"]
    out["sign_in_ratio"] = out["sign_ins"]["rps"] / out["resets"]["rps"]
    return out


@contextlib.contextmanager
def _stopping(server: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    try:
        yield server
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def worker_rss(url: str, count: int = 100_000) -> dict[str, Any]:
    """RSS of one `authsvc worker` (null://) sampled while it sends `count` link emails."""
    queue_links(url, count)
    marks: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as data:
        worker = subprocess.Popen(
            [authsvc_script(), "worker", "--concurrency", "8", "--batch", "64",
             "--poll-seconds", "1"],
            env=worker_env(url, "null://", data), stderr=subprocess.DEVNULL)
        try:
            process = psutil.Process(worker.pid)
            with psycopg.connect(url, autocommit=True) as conn:
                deadline = time.monotonic() + 600
                sent = 0
                while sent < count and time.monotonic() < deadline:
                    row = conn.execute("SELECT count(*) FROM email_jobs WHERE status = 'sent'"
                                       ).fetchone()
                    sent = row[0] if row else 0
                    marks.append((sent, process.memory_info().rss / 2**20))
                    time.sleep(1.0)  # sampling interval
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    assert sent == count, f"{sent} of {count} sent"
    warm = [rss for done, rss in marks if done >= count // 5]
    return {"jobs": count, "samples": marks, "after_warmup_mb": warm[0] if warm else None,
            "final_mb": marks[-1][1], "max_mb": max(rss for _, rss in marks)}
