"""The users table: typed wrappers over sql/users.sql."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.sql import load_queries

Q = load_queries(Path(__file__).parent / "sql" / "users.sql")


@dataclass(frozen=True)
class User:
    id: int
    email: str
    password_hash: str
    email_verified_at: datetime | None
    reset_version: int
    verify_version: int
    session_version: int

    def version(self, purpose: str) -> int:
        return self.reset_version if purpose == "reset" else self.verify_version


def _one_user(conn: Connection, name: str, params: Mapping[str, object]) -> User | None:
    with conn.cursor(row_factory=class_row(User)) as cur:
        return cur.execute(Q[name], params).fetchone()


def find_user_by_email(conn: Connection, email: str) -> User | None:
    return _one_user(conn, "find_user_by_email", {"email": email})


def find_user_by_id(conn: Connection, user_id: int) -> User | None:
    return _one_user(conn, "find_user_by_id", {"user_id": user_id})


def insert_user(conn: Connection, email: str, password_hash: str) -> User | None:
    return _one_user(conn, "insert_user", {"email": email, "password_hash": password_hash})


def claim_unverified_account(conn: Connection, email: str, password_hash: str) -> User | None:
    params = {"email": email, "password_hash": password_hash}
    return _one_user(conn, "claim_unverified_account", params)


def redeem_verify_link(conn: Connection, user_id: int, version: int, now: datetime) -> User | None:
    return _one_user(
        conn, "redeem_verify_link", {"user_id": user_id, "version": version, "now": now}
    )


def redeem_reset_link(
    conn: Connection, user_id: int, version: int, password_hash: str, now: datetime
) -> User | None:
    params = {"user_id": user_id, "version": version, "password_hash": password_hash, "now": now}
    return _one_user(conn, "redeem_reset_link", params)


def change_password(
    conn: Connection, user_id: int, session_version: int, password_hash: str, now: datetime
) -> User | None:
    params = {
        "user_id": user_id,
        "session_version": session_version,
        "password_hash": password_hash,
        "now": now,
    }
    return _one_user(conn, "change_password", params)


def update_password_hash(
    conn: Connection, user_id: int, verified_hash: str, password_hash: str
) -> None:
    params = {"user_id": user_id, "verified_hash": verified_hash, "password_hash": password_hash}
    conn.execute(Q["update_password_hash"], params)


def record_redemption(
    conn: Connection, user_id: int, purpose: str, version: int, now: datetime
) -> None:
    params = {"user_id": user_id, "purpose": purpose, "version": version, "now": now}
    conn.execute(Q["record_redemption"], params)


def was_redeemed(conn: Connection, user_id: int, purpose: str, version: int) -> bool:
    params = {"user_id": user_id, "purpose": purpose, "version": version}
    row = conn.execute(Q["was_redeemed"], params).fetchone()
    return bool(row and row[0])
