"""The users table: typed wrappers over users.sql."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import LiteralString

from psycopg import Connection
from psycopg.rows import class_row, dict_row

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class User:
    id: int
    email: str
    password_hash: str
    email_verified_at: datetime | None
    reset_version: int
    verify_version: int
    signup_count: int
    email_change_version: int
    account_delete_version: int
    email_revert_version: int  # changes confirmed so far: the newest undo link's version
    pending_email: str | None  # the new address of a change not yet confirmed
    sign_in_version: int  # SPEC §13's sign-in links and codes

    def version(self, purpose: str) -> int:
        """The current version of a newest-only purpose (SQL link_version, migrations/0030):
        a change's two links, to the new address and to the old one, share one."""
        return {
            "reset": self.reset_version,
            "verify": self.verify_version,
            "email_change": self.email_change_version,
            "email_change_approval": self.email_change_version,
            "account_delete": self.account_delete_version,
            "sign_in": self.sign_in_version,
        }[purpose]

    @property
    def verified(self) -> bool:
        return self.email_verified_at is not None

    @property
    def has_password(self) -> bool:
        """False for an account created by a sign-in link, or whose password was discarded
        or cleared ('' matches no password)."""
        return self.password_hash != ""

    @property
    def contested(self) -> bool:
        """Unproven, and more than one signup or a resend: who chose the password is unknown."""
        return not self.verified and self.signup_count > 1


def _one_user(conn: Connection, name: str, params: Mapping[str, object]) -> User | None:
    return user_from(conn, Q[name], params)


def user_from(conn: Connection, query: LiteralString, params: Mapping[str, object]) -> User | None:
    """The account a statement returns (its columns as this module's statements list them)."""
    with conn.cursor(row_factory=class_row(User)) as cur:
        return cur.execute(query, params).fetchone()


def find_user_by_email(conn: Connection, email: str) -> User | None:
    return _one_user(conn, "find_user_by_email", {"email": email})


def find_user_by_id(conn: Connection, user_id: int) -> User | None:
    return _one_user(conn, "find_user_by_id", {"user_id": user_id})


def lock_user(conn: Connection, user_id: int) -> User | None:
    """The account, row-locked until the caller's transaction ends (None: it is gone)."""
    return _one_user(conn, "lock_user", {"user_id": user_id})


def lock_user_by_email(conn: Connection, email: str) -> User | None:
    """The account holding `email`, row-locked until the caller's transaction ends."""
    return _one_user(conn, "lock_user_by_email", {"email": email})


def register_signup(
    conn: Connection, email: str, password_hash: str, locale: str | None = None
) -> User:
    """Create the account, in `locale`, or record another signup for it (see users.sql)."""
    params = {"email": email, "password_hash": password_hash, "locale": locale}
    user = _one_user(conn, "register_signup", params)
    assert user is not None  # the upsert returns a row in every case
    return user


def redeem_verify_link(
    conn: Connection, user_id: int, version: int, password_hash: str | None, now: datetime
) -> User | None:
    params = {"user_id": user_id, "version": version, "password_hash": password_hash, "now": now}
    return _one_user(conn, "redeem_verify_link", params)


@dataclass(frozen=True)
class RedeemedReset:
    user: User
    first_proof: bool  # the address was unproven until this redemption


def redeem_reset_link(
    conn: Connection, user_id: int, version: int, password_hash: str, now: datetime
) -> RedeemedReset | None:
    params = {"user_id": user_id, "version": version, "password_hash": password_hash, "now": now}
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(Q["redeem_reset_link"], params).fetchone()
    if row is None:
        return None
    first_proof = bool(row.pop("first_proof"))
    return RedeemedReset(User(**row), first_proof)


def change_password(
    conn: Connection,
    user_id: int,
    session_id: int,
    verified_hash: str,
    password_hash: str,
    now: datetime,
) -> User | None:
    params = {
        "user_id": user_id,
        "session_id": session_id,
        "verified_hash": verified_hash,
        "password_hash": password_hash,
        "now": now,
    }
    return _one_user(conn, "change_password", params)


def update_password_hash(
    conn: Connection, user_id: int, verified_hash: str, password_hash: str
) -> bool:
    """False when the password changed since `verified_hash` was read."""
    params = {"user_id": user_id, "verified_hash": verified_hash, "password_hash": password_hash}
    return conn.execute(Q["update_password_hash"], params).rowcount == 1


def record_redemption(
    conn: Connection, user_id: int, purpose: str, version: int, now: datetime
) -> None:
    params = {"user_id": user_id, "purpose": purpose, "version": version, "now": now}
    conn.execute(Q["record_redemption"], params)


def was_redeemed(conn: Connection, user_id: int, purpose: str, version: int) -> bool:
    params = {"user_id": user_id, "purpose": purpose, "version": version}
    row = conn.execute(Q["was_redeemed"], params).fetchone()
    return bool(row and row[0])
