"""What every benchmark needs: a fresh migrated database, figures, the worker's environment."""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from authsvc.db.migrate import upgrade
from testkit.figures import percentile
from testkit.postgres import throwaway_postgres

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
_COUNTER = itertools.count()


@contextmanager
def bench_server() -> Iterator[str]:
    """One throwaway embedded PostgreSQL for a whole run (or AUTHSVC_BENCH_DATABASE_URL's)."""
    base = os.environ.get("AUTHSVC_BENCH_DATABASE_URL")
    if base:
        yield base
        return
    with tempfile.TemporaryDirectory(prefix="authsvc-bench-", dir="/tmp") as folder:
        handle = throwaway_postgres(Path(folder))
        try:
            yield str(handle.get_uri())
        finally:
            handle.cleanup()


@contextmanager
def fresh_database(base: str | None = None) -> Iterator[str]:
    """A migrated, empty database on `base`, AUTHSVC_BENCH_DATABASE_URL's or a throwaway server."""
    base = base or os.environ.get("AUTHSVC_BENCH_DATABASE_URL")
    with tempfile.TemporaryDirectory(prefix="authsvc-bench-", dir="/tmp") as folder:
        handle = None
        if not base:
            handle = throwaway_postgres(Path(folder))
            base = str(handle.get_uri())
        name = f"authsvc_bench_{os.getpid()}_{next(_COUNTER)}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = urlunsplit(urlsplit(base)._replace(path="/" + name))
        upgrade(url)
        try:
            yield url
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                conn.execute(drop.format(sql.Identifier(name)))
            if handle is not None:
                handle.cleanup()


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
    its number `n`), then `pending` due ones: a big outbox as months of use leave it."""
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
