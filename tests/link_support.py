"""Minting the newest queued link the way the worker will (no token is stored)."""

from __future__ import annotations

import psycopg

from authsvc.accounts.tokens import TokenClaims
from authsvc.services import Services


def latest_job(conn: psycopg.Connection, email: str, purpose: str) -> tuple[int, TokenClaims]:
    """(job id, claims) of the newest queued `purpose` email for `email`."""
    row = conn.execute(
        "SELECT id, user_id, token_version, issued_at FROM email_jobs"
        " WHERE recipient = %s AND purpose = %s ORDER BY id DESC LIMIT 1",
        (email, purpose),
    ).fetchone()
    assert row is not None, f"no {purpose} email queued for {email}"
    return row[0], TokenClaims(row[1], purpose, row[2], row[3])


def latest_claims(conn: psycopg.Connection, email: str, purpose: str) -> TokenClaims:
    """The claims of the newest queued `purpose` email for `email`."""
    return latest_job(conn, email, purpose)[1]


def latest_link(conn: psycopg.Connection, svc: Services, email: str, purpose: str) -> str:
    """The token the newest queued `purpose` email for `email` will carry."""
    return svc.tokens.mint(latest_claims(conn, email, purpose))


def latest_code(conn: psycopg.Connection, svc: Services, email: str, purpose: str) -> str:
    """The 6-digit code the newest queued `purpose` email for `email` will carry."""
    return svc.tokens.mint_code(latest_claims(conn, email, purpose))
