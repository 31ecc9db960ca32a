"""Claiming and finishing email jobs: typed wrappers over jobs.sql.

Every state change appends to the audit trail in the same statement and is
logged as one JSON line with the same fields.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple
from uuid import UUID

from psycopg import Connection
from psycopg.cursor import BaseCursor
from psycopg.rows import RowMaker

from authsvc.db.queries import load_queries
from authsvc.observability.logs import log_events

Q = load_queries(Path(__file__).with_suffix(".sql"))
log = logging.getLogger(__name__)
FINAL_STATUSES = ("sent", "failed", "superseded", "expired", "suppressed")
OUTCOME_EVENTS = (*FINAL_STATUSES, "retry", "ambiguous", "released")


class ClaimedJob(NamedTuple):
    """A job leased to this worker, as the claim statement returned it.

    Immutable, as the sender and completer threads share it. A NamedTuple
    rather than a frozen dataclass because a claim builds one per row: the
    dataclass's keyword __init__ (through psycopg's class_row) cost about
    12 µs of the worker's single-GIL CPU per email, a fifth of it in the
    drain benchmark; positional construction costs under 1 µs. Never log
    or serialise a job whole: as a tuple it would carry webhook_secret past
    the repr that hides it.
    """

    id: int  # internal and ordered: never in anything an outsider sees
    public_id: UUID  # stable per job, unordered: Message-ID, X-Authsvc-Job, provider keys, events
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
    kind: str = "email"  # or "webhook" (authsvc/worker/event_delivery.py)
    app_id: UUID | None = None
    webhook_url: str | None = None  # webhook jobs: the app's URL now, None if revoked
    webhook_secret: bytes | None = None  # sealed; never in repr
    suppressed: bool = False  # the recipient is on the suppression list (bounces/suppressions.py)
    # Emails only: the asking app's hook, when it may deliver this one (migrations/0029).
    delivery_url: str | None = None
    created_at: datetime | None = None
    user_locale: str | None = None  # the account's (SPEC §14), after the request's own
    brand_app_id: UUID | None = None  # the app whose brand and templates this email takes

    @property
    def superseded(self) -> bool:
        """A newer link of the same purpose was issued after this job was queued."""
        return self.purpose is not None and self.current_version != self.token_version

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}"
                          for name, value in zip(self._fields, self, strict=True)
                          if name != "webhook_secret")
        return f"ClaimedJob({shown})"


def _claimed_job_row(cursor: BaseCursor[Any, Any]) -> RowMaker[ClaimedJob]:
    """Rows of claim_batch as ClaimedJob, by position once the names are known to match."""
    names = tuple(column.name for column in cursor.description or ())
    if names != ClaimedJob._fields:
        raise RuntimeError(f"claim_batch returns {names}; ClaimedJob has {ClaimedJob._fields}")
    return ClaimedJob._make


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


def _line(event: str, params: dict[str, Any],
          level: int = logging.INFO) -> tuple[str, int, dict[str, Any]]:
    """One job's log line: SPEC §7's fields, the same as its trail row."""
    return event, level, {
        "job_id": params["job_id"],
        "lease_owner": params["owner"],
        "lease_expires_at": params["lease_expires_at"],
        "attempt": params["attempt"],
        "token_version": params["token_version"],
        "provider_message_id": params.get("provider_message_id"),
        "error": params.get("error"),
    }


def claim_batch(conn: Connection, owner: str, batch: int, lease_seconds: float) -> list[ClaimedJob]:
    """Lease up to `batch` due jobs to `owner` and return them, oldest first."""
    params = {"owner": owner, "batch": batch, "lease_seconds": lease_seconds}
    with conn.cursor(row_factory=_claimed_job_row) as cur:
        jobs = cur.execute(Q["claim_batch"], params).fetchall()
    log_events(log, [_line("claimed", _fields(job)) for job in jobs])
    return jobs


@dataclass(frozen=True)
class Outcome:
    """What became of one claim, waiting to be recorded (see record_outcomes)."""

    job: ClaimedJob
    event: str  # a final status, or retry / ambiguous / released
    provider_message_id: str | None = None
    error: str | None = None
    delay_seconds: float = 0.0  # retry and ambiguous: due again after this

    def __post_init__(self) -> None:
        if self.event not in OUTCOME_EVENTS:
            raise ValueError(f"not an outcome: {self.event!r}")


def record_outcomes(conn: Connection, outcomes: Sequence[Outcome]) -> list[bool]:
    """Record every outcome in one statement; False where that claim's lease was lost."""
    if not outcomes:
        return []
    params = {
        "job_ids": [o.job.id for o in outcomes],
        "owners": [o.job.lease_owner for o in outcomes],
        "attempts": [o.job.attempt_count for o in outcomes],
        "events": [o.event for o in outcomes],
        "provider_message_ids": [o.provider_message_id for o in outcomes],
        "errors": [o.error for o in outcomes],
        "delays": [float(o.delay_seconds) for o in outcomes],
        "lease_expires": [o.job.lease_expires_at for o in outcomes],
        "token_versions": [o.job.token_version for o in outcomes],
    }
    recorded = {(row[0], row[1]) for row in conn.execute(Q["record_outcomes"], params)}
    results = []
    lines = []
    for outcome in outcomes:
        ok = (outcome.job.id, outcome.job.attempt_count) in recorded
        results.append(ok)
        fields = _fields(outcome.job, provider_message_id=outcome.provider_message_id,
                         error=outcome.error)
        if ok:
            level = logging.WARNING if outcome.event == "failed" else logging.INFO
            lines.append(_line(outcome.event, fields, level))
        elif outcome.event != "released":
            lost = {**fields, "error": f"lease lost before recording {outcome.event!r}"}
            lines.append(_line("lease_lost", lost, logging.WARNING))
    log_events(log, lines)
    return results
