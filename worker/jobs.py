"""Claiming and finishing email jobs: typed wrappers over jobs.sql.

Every state change appends to the audit trail in the same statement and is
logged as one JSON line with the same fields.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.logs import log_event
from authsvc.sql import load_queries

Q = load_queries(Path(__file__).parent / "jobs.sql")
log = logging.getLogger("worker.jobs")
FINAL_STATUSES = ("sent", "failed", "superseded", "expired")


@dataclass(frozen=True)
class ClaimedJob:
    """A job leased to this worker, as the claim statement returned it."""

    id: int
    template: str
    recipient: str
    payload: dict[str, Any]
    user_id: int | None
    purpose: str | None
    token_version: int | None
    issued_at: datetime | None
    attempt_count: int
    lease_owner: str
    lease_expires_at: datetime
    current_version: int | None
    ambiguous_before: bool

    @property
    def superseded(self) -> bool:
        """A newer link of the same purpose was issued after this job was queued."""
        return self.purpose is not None and self.current_version != self.token_version


def new_lease_owner() -> str:
    """host:pid:random, unique per worker process even across pid reuse."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _fields(job: ClaimedJob, **extra: Any) -> dict[str, Any]:
    """The claim's identity (id, owner, attempt) and the audit fields every statement takes."""
    return {
        "job_id": job.id,
        "owner": job.lease_owner,
        "lease_expires_at": job.lease_expires_at,
        "attempt": job.attempt_count,
        "token_version": job.token_version,
        "provider_message_id": None,
        "error": None,
        **extra,
    }


def _log(event: str, params: dict[str, Any], level: int = logging.INFO) -> None:
    log_event(
        log,
        event,
        level,
        job_id=params["job_id"],
        lease_owner=params["owner"],
        lease_expires_at=params["lease_expires_at"],
        attempt=params["attempt"],
        token_version=params["token_version"],
        provider_message_id=params.get("provider_message_id"),
        error=params.get("error"),
    )


def claim_batch(conn: Connection, owner: str, batch: int, lease_seconds: float) -> list[ClaimedJob]:
    """Lease up to `batch` due jobs to `owner` and return them, oldest first."""
    params = {"owner": owner, "batch": batch, "lease_seconds": lease_seconds}
    with conn.cursor(row_factory=class_row(ClaimedJob)) as cur:
        jobs = cur.execute(Q["claim_batch"], params).fetchall()
    for job in jobs:
        _log("claimed", _fields(job))
    return jobs


def _lease_lost(conn: Connection, params: dict[str, Any], wanted: str) -> None:
    params = {**params, "error": f"lease lost before recording {wanted!r}"}
    conn.execute(Q["append_event"], {**params, "event": "lease_lost"})
    _log("lease_lost", params, logging.WARNING)


def finish_job(
    conn: Connection,
    job: ClaimedJob,
    status: str,
    *,
    provider_message_id: str | None = None,
    error: str | None = None,
) -> bool:
    """Record sent/failed/superseded/expired; False (and `lease_lost`) if the lease is gone."""
    if status not in FINAL_STATUSES:
        raise ValueError(f"not a final status: {status!r}")
    event = status
    params = _fields(job, provider_message_id=provider_message_id, error=error)
    row = conn.execute(Q["finish_job"], {**params, "status": status, "event": event}).fetchone()
    if row is None:
        _lease_lost(conn, params, event)
        return False
    _log(event, params, logging.INFO if status != "failed" else logging.WARNING)
    return True


def schedule_retry(
    conn: Connection, job: ClaimedJob, delay_seconds: float, error: str, *, ambiguous: bool = False
) -> bool:
    """Back to pending, due after `delay_seconds`; False (and `lease_lost`) if the lease is gone."""
    event = "ambiguous" if ambiguous else "retry"
    params = _fields(job, error=error)
    query_params = {**params, "event": event, "delay_seconds": delay_seconds}
    if conn.execute(Q["schedule_retry"], query_params).fetchone() is None:
        _lease_lost(conn, params, event)
        return False
    _log(event, params)
    return True


def release_lease(conn: Connection, job: ClaimedJob, reason: str) -> bool:
    """Hand back a claimed job that was not sent; False if the lease was already gone."""
    params = _fields(job, error=reason)
    if conn.execute(Q["release_lease"], params).fetchone() is None:
        return False
    _log("released", params)
    return True
