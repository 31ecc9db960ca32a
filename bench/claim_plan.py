"""EXPLAIN ANALYZE of the claim statement on a 20,000-row outbox (rolled back).

Run: .venv/bin/python bench/claim_plan.py
"""

from __future__ import annotations

import psycopg

from authsvc.worker.jobs import Q
from bench.common import fresh_database, report

ROWS = 20_000


def main() -> None:
    with fresh_database() as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO users (email, password_hash)"
            " SELECT 'u' || n || '@example.com', 'x' FROM generate_series(1, %s) n", (ROWS,)
        )
        # Mostly finished history plus a pending tail: what a live outbox looks like.
        conn.execute(
            "INSERT INTO email_jobs"
            " (template, recipient, user_id, status, created_at, next_attempt_at)"
            " SELECT 'password_changed', email, id,"
            "   CASE WHEN id % 10 = 0 THEN 'pending' ELSE 'sent' END,"
            "   now() - (id || ' seconds')::interval, now() - (id || ' seconds')::interval"
            " FROM users"
        )
        conn.execute(
            "INSERT INTO email_job_events (job_id, event, attempt)"
            " SELECT id, e, 1 FROM email_jobs, unnest(ARRAY['claimed', 'sent']) e"
            " WHERE status = 'sent'"
        )
        conn.execute("ANALYZE")
        params = {"owner": "explain", "batch": 100, "lease_seconds": 45}
        lines = [f"claim_batch plan, {ROWS} jobs ({ROWS // 10} pending), batch 100:"]
        explain = "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + Q["claim_batch"]
        with conn.transaction(force_rollback=True):
            lines += [row[0] for row in conn.execute(explain, params)]
        # psycopg prepares a statement after five runs; PostgreSQL may then
        # switch to a generic plan, which must not regress to a full scan.
        lines.append("")
        lines.append("same, generic plan (what a prepared statement may use):")
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            lines += [row[0] for row in conn.execute(explain, params, prepare=True)]
        report("claim_plan", lines)


if __name__ == "__main__":
    main()
