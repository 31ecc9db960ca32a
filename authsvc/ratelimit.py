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
from psycopg.pq import PipelineStatus, TransactionStatus

from authsvc.config import RateLimit
from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


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
class RateLimitHit:
    """One event to count in a bucket's window: the arguments of SQL rate_limit_hit().

    `hit` is the statement that only counts; apps.sql find_app_counting_call,
    codes.sql email_budget_hit and outbox/producer.sql queue_link count as
    they do something else, and codes.sql count_code_attempt counts its own
    way (it stops at the limit, so the tries it gives back are exact).
    """

    bucket: str
    window_start: datetime
    limit: int  # events allowed per window
    retry_after: int  # seconds until the window resets

    def params(self) -> dict[str, object]:
        return {"bucket": self.bucket, "window_start": self.window_start, "limit": self.limit}

    def decision(self, within: bool) -> Decision:
        return Decision(within, self.retry_after)


def hit_for(kind: str, key: str, limit: RateLimit, now: datetime) -> RateLimitHit:
    start, retry_after = _window(limit, now)
    return RateLimitHit(_bucket(kind, key), start, limit.limit, retry_after)


def check_own_transaction(conn: Connection) -> None:
    """Refuse a count without the disk wait unless its statement is its own transaction.

    A count committed without waiting for its WAL flush costs nothing if a
    crash loses it, and the wait is what queues a hot bucket's callers:
    every hit of one app key (or one address's forms) updates the same row
    and holds it through its commit. In a caller's transaction, though, or
    in a pipeline (whose statements share one implicit transaction up to
    the next sync), the setting would make every other write there
    non-durable.
    """
    if (not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE
            or conn.info.pipeline_status != PipelineStatus.OFF):
        raise ValueError("wait_for_disk=False needs an autocommit connection outside a transaction"
                         " and outside a pipeline")


def hit(
    conn: Connection, kind: str, key: str, limit: RateLimit, now: datetime,
    *, wait_for_disk: bool = True,
) -> Decision:
    """Count one event; allowed while the window's count stays within the limit.

    `wait_for_disk=False`: see check_own_transaction.
    """
    if not wait_for_disk:
        check_own_transaction(conn)
    counted = hit_for(kind, key, limit, now)
    row = conn.execute(Q["hit"], {**counted.params(), "wait_for_disk": wait_for_disk}).fetchone()
    assert row is not None  # the function returns one row
    return counted.decision(bool(row[0]))


def refund(conn: Connection, kind: str, key: str, limit: RateLimit, now: datetime) -> None:
    """Give back one event counted in the current window (it turned out not to count)."""
    start, _ = _window(limit, now)
    conn.execute(Q["refund"], {"bucket": _bucket(kind, key), "window_start": start})


def clear(conn: Connection, kind: str, key: str) -> None:
    """Forget everything counted for this key (e.g. failed logins after a completed reset)."""
    conn.execute(Q["clear"], {"bucket": _bucket(kind, key)})


def prune_rate_limits(conn: Connection, now: datetime, keep: timedelta = timedelta(days=1)) -> int:
    return conn.execute(Q["prune_rate_limits"], {"before": now - keep}).rowcount
