"""The inbox queries the async front runs: the same SQL as authsvc.inbox.messages, awaited."""

from __future__ import annotations

from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool

from authsvc.inbox.messages import (
    RETENTION_SECONDS,
    InboxMessage,
    Page,
    Q,
    ScopeSummary,
    Seen,
    ids_to_inline,
    scan_params,
    with_bodies,
)
from authsvc.inbox.params import MAX_LISTED, Filters


async def scan_scope(
    pool: AsyncConnectionPool, scope: str, since: int, filters: Filters
) -> list[Seen]:
    """What a waiting request re-checks (no bodies)."""
    async with pool.connection() as conn, conn.cursor(row_factory=class_row(Seen)) as cur:
        params = scan_params(scope, since, filters, MAX_LISTED + 1)
        await cur.execute(Q["scan_scope"], params)
        return await cur.fetchall()


async def list_messages(
    pool: AsyncConnectionPool, scope: str, *, since: int, filters: Filters, limit: int,
    bodies: bool,
) -> Page:
    """One page, oldest first; bodies inlined within the answer's byte budget."""
    async with pool.connection() as conn:
        async with conn.cursor(row_factory=class_row(InboxMessage)) as cur:
            await cur.execute(Q["list_summaries"], scan_params(scope, since, filters, limit + 1))
            summaries = await cur.fetchall()
        summaries, more = summaries[:limit], len(summaries) > limit
        chosen = ids_to_inline(summaries) if bodies else []
        found: dict[int, tuple[str | None, str | None]] = {}
        if chosen:
            cursor = await conn.execute(Q["get_bodies"], {"ids": chosen})
            for inbox_id, text, html in await cursor.fetchall():
                found[inbox_id] = (text, html)
    return Page(with_bodies(summaries, found), more)


async def list_scopes(pool: AsyncConnectionPool, limit: int = 50) -> list[ScopeSummary]:
    """The most recently written scopes, newest first."""
    async with pool.connection() as conn, conn.cursor(row_factory=class_row(ScopeSummary)) as cur:
        params = {"limit": limit, "retention_seconds": RETENTION_SECONDS}
        await cur.execute(Q["list_scopes"], params)
        return await cur.fetchall()
