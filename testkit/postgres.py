"""A throwaway embedded PostgreSQL (pgserver) for harnesses that need a server of their own."""

from __future__ import annotations

import tempfile
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def throwaway_postgres(folder: Path) -> Any:
    """Start a server on `folder`/pgdata, deleted with its data by `handle.cleanup()`.

    Keep `folder` short: the Unix socket lives there (107-byte limit). When we run
    as root pgserver runs postgres as its own user, so the folder must be readable.
    """
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # XDG_RUNTIME_DIR fallback chatter
        import pgserver

        return pgserver.get_server(folder / "pgdata", cleanup_mode="delete")


@contextmanager
def server_or_throwaway(server_url: str | None) -> Iterator[str]:
    """`server_url` if given, else the URL of a throwaway server that lasts the block."""
    if server_url:
        yield server_url
        return
    with tempfile.TemporaryDirectory(prefix="authsvc-pg-", dir="/tmp") as folder:
        handle = throwaway_postgres(Path(folder))
        try:
            yield str(handle.get_uri())
        finally:
            handle.cleanup()


@contextmanager
def migrated_database(server_url: str, label: str) -> Iterator[str]:
    """A new database on the server with every migration applied, dropped afterwards.

    `label` goes in its name (authsvc_LABEL_…), to tell whose it is on a shared server.
    """
    from authsvc.db.migrate import upgrade

    name = f"authsvc_{label}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = urlunsplit(urlsplit(server_url)._replace(path="/" + name))
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


def pg_ctl(server: Any, *args: str) -> None:
    """Run the embedded server's own pg_ctl (restart, stop) against its data folder."""
    from pgserver._commands import pg_ctl as run  # type: ignore[attr-defined]  # generated

    run(list(args), pgdata=server.pgdata, user=server.system_user, timeout=60)
