"""Arranging accounts directly in the database, for tests about something else."""

from __future__ import annotations

import psycopg


def insert_user(
    conn: psycopg.Connection, email: str, password_hash: str, *, verified: bool = True
) -> int:
    """An account with this hash, its address proven unless asked otherwise; returns its id."""
    row = conn.execute(
        "INSERT INTO users (email, password_hash, email_verified_at)"
        " VALUES (%s, %s, CASE WHEN %s THEN now() END) RETURNING id",
        (email, password_hash, verified),
    ).fetchone()
    assert row is not None
    return int(row[0])
