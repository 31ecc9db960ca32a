"""The operators table: which confirmed accounts may open the console (roles.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class Operator:
    user_id: int
    email: str
    added_at: datetime
    totp: bool  # signs in with an authenticator's code, not an emailed one
    last_seen_at: datetime | None


def add_operator(conn: Connection, user_id: int, now: datetime) -> bool:
    """Give the role; False when the account already has it or its address is not proven."""
    return conn.execute(Q["add_operator"], {"user_id": user_id, "now": now}).fetchone() is not None


def remove_operator(conn: Connection, user_id: int) -> bool:
    """Take the role away (their console sessions end at once); False if they had none."""
    return conn.execute(Q["remove_operator"], {"user_id": user_id}).fetchone() is not None


def list_operators(conn: Connection) -> list[Operator]:
    with conn.cursor(row_factory=class_row(Operator)) as cur:
        return cur.execute(Q["list_operators"]).fetchall()


def set_totp(conn: Connection, user_id: int, sealed: bytes | None) -> bool:
    """Store the operator's sealed TOTP secret (None: remove it); False if not an operator."""
    params = {"user_id": user_id, "sealed": sealed}
    return conn.execute(Q["set_totp"], params).fetchone() is not None
