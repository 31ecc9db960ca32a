"""How long a provider notification's check of what authsvc sent takes, with and without
email_jobs_recipient (migration 0036).

Run: .venv/bin/python -m bench.bounce_match [--sent 1000000]
Fills a fresh database with SENT emails sent over the last 29 days, then times the
check a verified bounce makes (authsvc/outbox/admin.sql, sent_to) for 15 of them, with
the index and after dropping it; prints the medians in ms.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from authsvc.outbox.admin import sent_to
from bench.common import fresh_database

LOOKUPS = 15
WITHIN_SECONDS = 30 * 86400


def _fill(conn: psycopg.Connection, sent: int) -> None:
    conn.execute(
        "INSERT INTO email_jobs (template, recipient, status, created_at, next_attempt_at,"
        " sent_at, attempt_count, provider_message_id)"
        " SELECT 'password_changed', 'u' || n || '@example.com', 'sent',"
        "   now() - interval '29 days' + (n * 2 || ' seconds')::interval, now(),"
        "   now() - interval '29 days' + (n * 2 || ' seconds')::interval, 1, 'm' || n"
        " FROM generate_series(1, %s::bigint) n", (sent,))
    conn.execute("ANALYZE email_jobs")


def _median_ms(conn: psycopg.Connection, sent: int) -> float:
    times = []
    for i in range(LOOKUPS):
        n = 1 + (i * 65537) % sent
        start = time.perf_counter()
        assert sent_to(conn, f"u{n}@example.com", message_id=f"m{n}", public_job_id=None,
                       within_seconds=WITHIN_SECONDS)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bounce_match")
    parser.add_argument("--sent", type=int, default=1_000_000)
    sent = parser.parse_args().sent
    with fresh_database() as url, psycopg.connect(url, autocommit=True) as conn:
        _fill(conn, sent)
        with_index = _median_ms(conn, sent)
        conn.execute("DROP INDEX email_jobs_recipient")
        without = _median_ms(conn, sent)
    print(f"bounce match over {sent:,} sent emails, median of {LOOKUPS}:"
          f" {with_index:.2f} ms with email_jobs_recipient, {without:.2f} ms without")


if __name__ == "__main__":
    main()
