"""What every benchmark needs: a fresh migrated database, figures, the worker's environment."""

from __future__ import annotations

import os
import re
import statistics
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import psycopg

from authsvc.outbox.admin import fold_counters
from testkit.figures import percentile
from testkit.postgres import migrated_database, server_or_throwaway

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
BENCHMARKS_DOC = ROOT / "docs" / "BENCHMARKS.md"


def bench_server() -> AbstractContextManager[str]:
    """One throwaway embedded PostgreSQL for a whole run (or AUTHSVC_BENCH_DATABASE_URL's)."""
    return server_or_throwaway(os.environ.get("AUTHSVC_BENCH_DATABASE_URL"))


@contextmanager
def fresh_database(base: str | None = None) -> Iterator[str]:
    """A migrated, empty database on `base`, AUTHSVC_BENCH_DATABASE_URL's or a throwaway server."""
    server_url = base or os.environ.get("AUTHSVC_BENCH_DATABASE_URL")
    with server_or_throwaway(server_url) as server, migrated_database(server, "bench") as url:
        yield url


def queue_notices(url: str, jobs: int) -> None:
    """`jobs` password-changed notices (no link, no user), analysed: a drain's input."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO email_jobs (template, recipient)"
            " SELECT 'password_changed', 'u' || n || '@example.com' FROM generate_series(1, %s) n",
            (jobs,),
        )
        conn.execute("VACUUM ANALYZE email_jobs")


def report(name: str, lines: list[str]) -> None:
    """Print the figures and keep them in bench/results/NAME.txt."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.txt").write_text(text)


def _section_pattern(heading: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)


def with_doc_section(document: str, heading: str, text: str) -> str:
    """`document` with the section under `heading` replaced by `text` (or `text` appended);
    every other section as it was. For the benchmarks that run apart from bench/suite.py."""
    pattern = _section_pattern(heading)
    if pattern.search(document):
        return pattern.sub(lambda _m: text, document)
    return document.rstrip("\n") + "\n\n" + text


def kept_doc_section(document: str, heading: str) -> str | None:
    """The section under `heading` of an existing BENCHMARKS.md, for bench/suite.py to carry
    over when it rewrites the rest."""
    found = _section_pattern(heading).search(document)
    return found.group(0) if found else None


def write_doc_section(heading: str, text: str) -> None:
    current = BENCHMARKS_DOC.read_text(encoding="utf-8") if BENCHMARKS_DOC.exists() else ""
    BENCHMARKS_DOC.write_text(with_doc_section(current, heading, text), encoding="utf-8")


__all__ = ["authsvc_script", "fresh_database", "percentile", "queue_notices", "report",
           "statistics", "worker_env"]


def worker_env(url: str, smtp_url: str, data_dir: str) -> dict[str, str]:
    return {
        **os.environ,
        "AUTHSVC_ENV": "test",
        "AUTHSVC_DATABASE_URL": url,
        "AUTHSVC_DIRECT_DATABASE_URL": url,  # no pooler here: LISTEN as before
        "AUTHSVC_MAIL_URL": smtp_url,
        "AUTHSVC_DATA_DIR": data_dir,
        "AUTHSVC_SECRET_KEYS": "bench-secret-key-0123456789abcdef-0123456789",
    }


def authsvc_script() -> str:
    return str(Path(sys.executable).parent / "authsvc")


def fill_finished_jobs(conn: psycopg.Connection, retained: int, status_sql: str,
                       pending: int) -> None:
    """`retained` finished jobs, oldest first (`status_sql` picks each one's status from
    its number `n`), then `pending` due ones: a big outbox as months of use leave it.
    For a fresh database: the counters it writes count every job in the table."""
    step = 1_000_000
    for start in range(0, retained, step):
        conn.execute(
            "INSERT INTO email_jobs (template, recipient, status, created_at, next_attempt_at,"
            " sent_at, attempt_count)"
            " SELECT 'password_changed', 'u' || n || '@example.com', " + status_sql + ","
            "   now() - interval '400 days' + (n || ' seconds')::interval,"
            "   now() - interval '400 days' + (n || ' seconds')::interval,"
            "   now() - interval '400 days' + (n || ' seconds')::interval + interval '1 second', 1"
            " FROM generate_series(%s::bigint, %s::bigint) n",  # type: ignore[arg-type]  # a literal of the caller
            (start + 1, min(retained, start + step)),
        )
    conn.execute(
        "INSERT INTO email_jobs (template, recipient) SELECT 'password_changed',"
        " 'p' || n || '@example.com' FROM generate_series(1, %s::int) n", (pending,)
    )
    # The status counters, as the statements that finish jobs write them
    # (migrations/schema.sql, outbox_counter_deltas), folded as months of use
    # leave them: rows inserted final have none. (The table was empty before.)
    conn.execute(
        "INSERT INTO outbox_counter_deltas (name, delta)"
        " SELECT 'jobs_' || status, count(*) FROM email_jobs WHERE status <> 'pending'"
        " GROUP BY status"
    )
    fold_counters(conn)
