"""The web_sessions table: server-side sessions, typed wrappers over sessions.sql.

The browser holds a random 256-bit token; the table keeps only its SHA-256
(a database leak opens no session), the account, when the session started
and was last seen, and the browser's user agent for the account page.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from psycopg import Connection
from psycopg.rows import class_row

from authsvc.accounts.users import User
from authsvc.db.queries import load_queries

Q = load_queries(Path(__file__).with_suffix(".sql"))
SESSION_LIFETIME = timedelta(days=14)
MAX_USER_AGENT = 300


@dataclass(frozen=True)
class WebSession:
    id: int
    created_at: datetime
    last_seen_at: datetime
    user_agent: str


@dataclass(frozen=True)
class SessionUser:
    """A live session's id and its account."""

    session_id: int
    user: User
    started_by: str = "password"  # or "sign_in": a sign-in link or code opened it
    started_at: datetime | None = None

    def signed_in_by_email_since(self, since: datetime) -> bool:
        """Whether a sign-in link or code opened this session at `since` or later: what an
        account with no password shows instead of a current password (SPEC §12 "Pages")."""
        return (self.started_by == "sign_in" and self.started_at is not None
                and self.started_at >= since)


def token_hash(token: str) -> bytes:
    """How a session token is stored (never the token itself): its SHA-256; the console's
    session and sign-in tokens too."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def start_session(
    conn: Connection, user: User, user_agent: str, now: datetime, *, started_by: str = "password"
) -> str | None:
    """Open a session; returns the token the cookie carries (never stored).

    None when the account's password is no longer `user.password_hash` (changed
    since it was verified) or its address is not proven.
    """
    token = secrets.token_urlsafe(32)
    with conn.transaction():
        conn.execute(
            Q["prune_user_sessions"],
            {"user_id": user.id, "expired_before": now - SESSION_LIFETIME},
        )
        started = conn.execute(
            Q["start_session"],
            {
                "token_hash": token_hash(token),
                "user_id": user.id,
                "verified_hash": user.password_hash,
                "now": now,
                "user_agent": user_agent[:MAX_USER_AGENT],
                "started_by": started_by,
            },
        ).fetchone()
    return token if started is not None else None


def find_session(conn: Connection, token: str, now: datetime) -> SessionUser | None:
    """The live session for this token and its account; None when ended or expired."""
    params = {"token_hash": token_hash(token), "now": now, "expired_before": now - SESSION_LIFETIME}
    row = conn.execute(Q["touch_session"], params).fetchone()
    if row is None:
        return None
    return SessionUser(row[0], User(*row[3:]), started_by=row[1], started_at=row[2])


def list_sessions(conn: Connection, user_id: int, now: datetime) -> list[WebSession]:
    with conn.cursor(row_factory=class_row(WebSession)) as cur:
        params = {"user_id": user_id, "expired_before": now - SESSION_LIFETIME}
        return cur.execute(Q["list_sessions"], params).fetchall()


def end_session(conn: Connection, token: str) -> None:
    conn.execute(Q["end_session"], {"token_hash": token_hash(token)})


def end_user_session(conn: Connection, user_id: int, session_id: int) -> bool:
    """End one of the user's sessions; False when it was not theirs or already gone."""
    params = {"user_id": user_id, "session_id": session_id}
    return conn.execute(Q["end_user_session"], params).rowcount == 1


def end_all_sessions(conn: Connection, user_id: int) -> int:
    return conn.execute(Q["end_all_sessions"], {"user_id": user_id}).rowcount
