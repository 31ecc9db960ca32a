"""Connections and pools: pooler-safe by construction, created once and passed in.

Every connection authsvc makes goes through here, because a transaction
pooler (PgBouncer in transaction mode, RDS Proxy, Supabase's and Neon's
poolers) hands each transaction to whichever server connection is free:
anything that outlives a transaction on the server breaks behind it. So no
server-side prepared statements (psycopg prepares a query after its fifth run
by default: `prepare_threshold=None` turns that off) unless the connection is
known to reach the server itself, and LISTEN only on the direct URL
(`listen_url`); without one, listeners poll.

A pool on the direct URL (AUTHSVC_DATABASE_URL equal to
AUTHSVC_DIRECT_DATABASE_URL, or the embedded server) does prepare: planning
was half of the worker's claim (1.7 ms -> 0.9 ms for one job) and a share of
every API call.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import Connection
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool

from authsvc.config import Settings
from authsvc.db.embedded import embedded_database_url

Conn = Connection[TupleRow]
# psycopg connection options that survive a transaction pooler.
POOLER_SAFE: dict[str, Any] = {"prepare_threshold": None}


def resolve_database_url(settings: Settings) -> str:
    """The configured URL, or the embedded server's (started on demand)."""
    return settings.database_url or embedded_database_url(settings.data_dir)


def resolve_listen_url(settings: Settings) -> str | None:
    """Where LISTEN may run: the direct URL, or the embedded server; None means poll.

    A configured AUTHSVC_DATABASE_URL may be a pooler, where LISTEN silently
    hears nothing (the server connection that ran it goes back to the pool),
    so it is never used for LISTEN. The embedded server has no pooler in front.
    """
    if settings.direct_database_url:
        return settings.direct_database_url
    if settings.database_url:
        return None
    return embedded_database_url(settings.data_dir)


def is_direct(url: str, listen_url: str | None) -> bool:
    """Whether `url` is the server itself: the one LISTEN may use (see resolve_listen_url)."""
    return listen_url is not None and url == listen_url


def connect(url: str, *, connect_timeout: int | None = None) -> Conn:
    """One autocommit connection without server-side prepared statements."""
    extra: dict[str, Any] = {} if connect_timeout is None else {"connect_timeout": connect_timeout}
    return psycopg.connect(url, autocommit=True, **POOLER_SAFE, **extra)


async def connect_async(url: str) -> psycopg.AsyncConnection[TupleRow]:
    """The asyncio twin of `connect`."""
    return await psycopg.AsyncConnection.connect(url, autocommit=True, **POOLER_SAFE)


def create_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    name: str = "authsvc",
    check: bool = True,
    direct: bool = False,
) -> ConnectionPool:
    """An open pool of autocommit connections; `direct` (see is_direct) lets it prepare.

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
        # On the server itself, psycopg's default: prepare what runs five times.
        kwargs={"autocommit": True, **({} if direct else POOLER_SAFE)},
        check=ConnectionPool.check_connection if check else None,
        timeout=10.0,  # a request waiting longer than this for a connection fails
        open=False,
    )
    pool.open(wait=True, timeout=30)
    return pool
