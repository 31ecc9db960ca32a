"""Arranging accounts directly in the database, for tests about something else."""

from __future__ import annotations

import psycopg

from authsvc.accounts.users import User, find_user_by_email


def insert_user(
    conn: psycopg.Connection, email: str, password_hash: str, *, verified: bool = True
) -> int:
    """An account with this hash, its address proven unless asked otherwise; returns its id."""
    return one_number(
        conn,
        "INSERT INTO users (email, password_hash, email_verified_at)"
        " VALUES (%s, %s, CASE WHEN %s THEN now() END) RETURNING id",
        (email, password_hash, verified),
    )


def stored_user(conn: psycopg.Connection, email: str) -> User:
    """The account stored for `email`, which must exist."""
    user = find_user_by_email(conn, email)
    assert user is not None, f"no account for {email}"
    return user


def one_number(conn: psycopg.Connection, query: str, params: tuple[object, ...] = ()) -> int:
    """The single integer `query` answers (a count, a RETURNING id)."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, query
    return int(row[0])


# Children before parents. DELETE, not TRUNCATE: on these tiny tables it takes
# under 1 ms against ~50 ms, which is most of a property test's budget per example.
ACCOUNT_TABLES = (
    "web_sessions", "token_redemptions", "email_job_events", "email_jobs",
    # What the outbox's statements counted.
    "outbox_counter_deltas", "outbox_counters", "idempotency_keys",
    "inbox_messages", "apps", "rate_limit_counters", "code_attempts", "suppressions",
    "users",
)


def forget_everyone(conn: psycopg.Connection) -> None:
    """Empty every table an account leaves rows in: a fresh start for the next example."""
    with conn.transaction():
        for table in ACCOUNT_TABLES:
            conn.execute(f"DELETE FROM {table}")
