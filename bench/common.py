"""What every benchmark needs: a fresh migrated database and the test SMTP double."""

from __future__ import annotations

import itertools
import os
import statistics
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from authsvc.migrate import upgrade

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(ROOT))  # for tests.smtp_double
_COUNTER = itertools.count()


@contextmanager
def bench_server() -> Iterator[str]:
    """One throwaway embedded PostgreSQL for a whole run (or AUTHSVC_BENCH_DATABASE_URL's)."""
    base = os.environ.get("AUTHSVC_BENCH_DATABASE_URL")
    if base:
        yield base
        return
    with tempfile.TemporaryDirectory(prefix="authsvc-bench-", dir="/tmp") as folder:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            handle = pgserver.get_server(Path(folder) / "pg", cleanup_mode="delete")
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
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pgserver

                handle = pgserver.get_server(Path(folder) / "pg", cleanup_mode="delete")
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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(name: str, lines: list[str]) -> None:
    """Print the figures and keep them in bench/results/NAME.txt."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.txt").write_text(text)


__all__ = ["authsvc_script", "fresh_database", "percentile", "report", "statistics", "worker_env"]


def worker_env(url: str, smtp_url: str, data_dir: str) -> dict[str, str]:
    return {
        **os.environ,
        "AUTHSVC_ENV": "test",
        "AUTHSVC_DATABASE_URL": url,
        "AUTHSVC_DIRECT_DATABASE_URL": url,  # no pooler here: LISTEN as before
        "AUTHSVC_SMTP_URL": smtp_url,
        "AUTHSVC_DATA_DIR": data_dir,
        "AUTHSVC_SECRET_KEYS": "bench-secret-key-0123456789abcdef-0123456789",
    }


def authsvc_script() -> str:
    return str(Path(sys.executable).parent / "authsvc")
