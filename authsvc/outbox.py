"""The producer side of the outbox: queue an email in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from authsvc.sql import load_queries

Q = load_queries(Path(__file__).parent / "sql" / "outbox.sql")
NOTIFY_CHANNEL = "authsvc_outbox"
TEMPLATES = ("verify", "reset", "account_exists", "password_changed")


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
) -> int:
    """Insert an outbox row and NOTIFY workers; both take effect at commit."""
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
        },
    ).fetchone()
    assert row is not None
    conn.execute(Q["notify_workers"])
    return int(row[0])
