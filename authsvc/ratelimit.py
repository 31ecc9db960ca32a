"""Fixed-window rate limits held in PostgreSQL, shared by every process and host.

A fixed window can admit up to twice the limit across a window boundary; for
abuse throttling that is an accepted trade for one atomic upsert per check.
Bucket keys are hashed so no email address or IP is stored here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from psycopg import Connection
from psycopg.pq import TransactionStatus

from authsvc.config import RateLimit
from authsvc.queries import load_queries

Q = load_queries(Path(__file__).parent / "sql" / "ratelimit.sql")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: int  # seconds until the window resets


def _bucket(kind: str, key: str) -> str:
    return kind + ":" + hashlib.sha256(f"{kind}:{key}".encode()).hexdigest()[:32]


def _window(limit: RateLimit, now: datetime) -> tuple[datetime, int]:
    epoch = int(now.timestamp())
    start = epoch - epoch % limit.window_seconds
    return datetime.fromtimestamp(start, UTC), start + limit.window_seconds - epoch


@dataclass(frozen=True)
class PendingHit:
    """One event to count: the parameters of rate_limit_hit (migrations/0015) and the verdict.

    For a statement that counts as it does something else (apps.sql
    find_app_counting_call); `hit` is the statement that only counts.
    """

    bucket: str
    window_start: datetime
    retry_after: int
    limit: RateLimit

    def decision(self, count: int) -> Decision:
        return Decision(count <= self.limit.limit, self.retry_after)


def pending_hit(kind: str, key: str, limit: RateLimit, now: datetime) -> PendingHit:
    start, retry_after = _window(limit, now)
    return PendingHit(_bucket(kind, key), start, retry_after, limit)


def check_own_transaction(conn: Connection) -> None:
    """Refuse a count without the disk wait unless its statement is its own transaction.

    A count committed without waiting for its WAL flush costs nothing if a
    crash loses it, and the wait is what queues a hot bucket's callers:
    every hit of one app key (or one address's forms) updates the same row
    and holds it through its commit. In a caller's transaction, though, the
    setting would make every write of that transaction non-durable.
    """
    if not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        raise ValueError("wait_for_disk=False needs an autocommit connection outside a transaction")


def hit(
    conn: Connection, kind: str, key: str, limit: RateLimit, now: datetime,
    *, wait_for_disk: bool = True,
) -> Decision:
    """Count one event; allowed while the window's count stays within the limit.

    `wait_for_disk=False`: see check_own_transaction.
    """
    if not wait_for_disk:
        check_own_transaction(conn)
    pending = pending_hit(kind, key, limit, now)
    params = {"bucket": pending.bucket, "window_start": pending.window_start,
              "wait_for_disk": wait_for_disk}
    row = conn.execute(Q["hit"], params).fetchone()
    return pending.decision(int(row[0]) if row else 1)


def refund(conn: Connection, kind: str, key: str, limit: RateLimit, now: datetime) -> None:
    """Give back one event counted in the current window (it turned out not to count)."""
    start, _ = _window(limit, now)
    conn.execute(Q["refund"], {"bucket": _bucket(kind, key), "window_start": start})


def clear(conn: Connection, kind: str, key: str) -> None:
    """Forget everything counted for this key (e.g. failed logins after a completed reset)."""
    conn.execute(Q["clear"], {"bucket": _bucket(kind, key)})


def prune_rate_limits(conn: Connection, now: datetime, keep: timedelta = timedelta(days=1)) -> int:
    return conn.execute(Q["prune_rate_limits"], {"before": now - keep}).rowcount
