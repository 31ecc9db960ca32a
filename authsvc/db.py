"""Connection pools: created once by whoever owns the process and passed in."""

from __future__ import annotations

from psycopg import Connection
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from authsvc.config import Settings
from authsvc.embedded import embedded_database_url

Conn = Connection[TupleRow]


def resolve_database_url(settings: Settings) -> str:
    """The configured URL, or the embedded server's (started on demand)."""
    return settings.database_url or embedded_database_url(settings.data_dir)


def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "authsvc",
    check: bool = True,
) -> ConnectionPool:
    """An open pool of autocommit connections.

    Autocommit plus explicit `with conn.transaction():` blocks makes every unit
    of work visible in the code; nothing commits by accident at checkout.
    `check=False` skips the round trip that tests each connection at checkout
    (the worker's hot path): the caller then retries an OperationalError and
    calls `pool.check()` after one, and the pool drops broken connections as
    they come back.
    """
    pool = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        kwargs={"autocommit": True},
        check=ConnectionPool.check_connection if check else None,
        timeout=10.0,  # a request waiting longer than this for a connection fails
        open=False,
    )
    pool.open(wait=True, timeout=30)
    return pool
