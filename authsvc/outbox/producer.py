"""The producer side of the outbox: queue an email in the caller's transaction.

A link request is counted against the address's email budget in the same
statement that queues it (count_and_queue_link), so it commits once either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from psycopg import Connection
from psycopg.types.json import Jsonb

from authsvc.db.queries import load_queries
from authsvc.outbox.rules import NOTIFY_CHANNEL, TEMPLATES
from authsvc.ratelimit import RateLimitHit

Q = load_queries(Path(__file__).with_suffix(".sql"))


def enqueue_email(
    conn: Connection,
    *,
    template: str,
    recipient: str,
    user_id: int | None = None,
    purpose: str | None = None,
    token_version: int | None = None,
    issued_at: datetime | None = None,
    payload: dict[str, Any] | None = None,
    app_id: UUID | None = None,
) -> int:
    """Insert an outbox row and NOTIFY workers; both take effect at commit.

    `app_id`: the app whose API call this email answers (it gets the flow's events).
    """
    if template not in TEMPLATES:
        raise ValueError(f"unknown email template {template!r}")
    row = conn.execute(
        Q["insert_job"],
        {
            "template": template,
            "recipient": recipient,
            "payload": Jsonb(payload or {}),
            "user_id": user_id,
            "purpose": purpose,
            "token_version": token_version,
            "issued_at": issued_at,
            "app_id": app_id,
        },
    ).fetchone()
    assert row is not None
    notify_workers(conn)
    return int(row[0])


def notify_workers(conn: Connection) -> None:
    """Wake idle workers: delivered only if the caller's transaction commits."""
    conn.execute(Q["notify_workers"], {"channel": NOTIFY_CHANNEL})


@dataclass(frozen=True)
class QueuedLink:
    """What a link request's statement did (queue_link)."""

    allowed: bool  # within the address's email budget
    job_id: int | None  # None: no account to send to, or over the budget


def count_and_queue_link(
    conn: Connection,
    *,
    email: str,
    purpose: str,
    issued_at: datetime,
    budget: RateLimitHit,
    code_digest: bytes,
    payload: dict[str, Any] | None = None,
    app_id: UUID | None = None,
    sign_up: bool = False,
    notify_unknown: bool = False,
) -> QueuedLink:
    """Count a link request; within `budget`, bump `email`'s `purpose` version and queue its link.

    One statement, one commit, whatever the address (queue_link). Within the
    budget the address also gets fresh code tries (`code_digest`:
    codes.address_digest). Nothing is queued when the address is (for
    verify) already verified, or has no account; then, for sign_in with
    `sign_up`, a placeholder account gets the link, and otherwise, with
    `notify_unknown` (reset and sign_in), the mailbox gets the no_account note.
    """
    if purpose not in ("reset", "verify", "sign_in"):
        raise ValueError(f"unknown link purpose {purpose!r}")
    params = {
        "email": email,
        "purpose": purpose,
        "issued_at": issued_at,
        "payload": Jsonb(payload or {}),
        "channel": NOTIFY_CHANNEL,
        "app_id": app_id,
        "digest": code_digest,
        "sign_up": sign_up,
        "notify_unknown": notify_unknown,
        **budget.params(),
    }
    row = conn.execute(Q["queue_link"], params).fetchone()
    assert row is not None  # the budget's row is always there
    allowed, job_id, _notified = row
    return QueuedLink(bool(allowed), job_id)
