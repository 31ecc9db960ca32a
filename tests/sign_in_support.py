"""Helpers for the tests of signing in by email (SPEC §13).

The person holding a mailbox is played by reading the outbox, as in
tests/address_life_support.py: every sign-in link and code queued for an
address is theirs.
"""

from __future__ import annotations

import psycopg
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from authsvc.apps import keys
from authsvc.services import Services
from tests.api_support import ApiCaller, register_shop_app
from tests.link_support import latest_code, latest_link


def sign_up_by_email_app(conn: psycopg.Connection, client: FlaskClient,
                         name: str = "club") -> ApiCaller:
    """An app registered with --sign-up-by-email, calling the API."""
    app, key = register_shop_app(conn, name)
    assert keys.set_sign_up_by_email(conn, app.id, True)
    return ApiCaller(client, app, key)


def request_sign_in(api: ApiCaller, email: str, **extra: str) -> TestResponse:
    response = api.post("/sign-in-links", {"email": email, **extra})
    assert response.status_code == 202, response.get_data(as_text=True)
    assert response.get_json() == {"status": "accepted"}
    return response


def sign_in_link(conn: psycopg.Connection, svc: Services, email: str) -> str:
    """The newest sign-in link sent to `email`."""
    return latest_link(conn, svc, email, "sign_in")


def sign_in_code(conn: psycopg.Connection, svc: Services, email: str) -> str:
    return latest_code(conn, svc, email, "sign_in")


def confirm(api: ApiCaller, body: dict[str, str]) -> TestResponse:
    return api.post("/sign-in-links/confirm", body)


def password_of(conn: psycopg.Connection, email: str) -> str | None:
    """The stored password hash ('' when the account has none; None: no account)."""
    row = conn.execute("SELECT password_hash FROM users WHERE email = %s", (email,)).fetchone()
    return row[0] if row else None


def sign_in_jobs(conn: psycopg.Connection, email: str) -> int:
    row = conn.execute("SELECT count(*) FROM email_jobs WHERE recipient = %s"
                       " AND template = 'sign_in'", (email,)).fetchone()
    assert row is not None
    return int(row[0])
