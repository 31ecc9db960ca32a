"""Helpers for the tests of an address over its life: change, undo, deletion (SPEC §12).

The person holding a mailbox is played by reading the outbox: every link and
code queued for an address is theirs (tests/link_support.py mints them the
way the worker will).
"""

from __future__ import annotations

import psycopg

from authsvc.accounts import actions
from authsvc.accounts.tokens import TokenClaims
from authsvc.services import Services
from tests.api_support import SIGNUP_PASSWORD, ApiCaller
from tests.link_support import latest_code, latest_link


def confirmed(api: ApiCaller, conn: psycopg.Connection, svc: Services, email: str,
              password: str = SIGNUP_PASSWORD) -> str:
    """A confirmed account at `email` with `password`, made through the API."""
    api.sign_up(email, password)
    token = latest_link(conn, svc, email, "verify")
    response = api.post("/verifications/confirm", {"token": token})
    assert response.status_code == 200, response.get_json()
    return email


def request_change(api: ApiCaller, email: str, password: str, new_email: str) -> None:
    response = api.post("/email-changes",
                        {"email": email, "password": password, "new_email": new_email})
    assert response.status_code == 202, response.get_data(as_text=True)
    assert response.get_json() == {"status": "confirmation_sent"}


def change_link(conn: psycopg.Connection, svc: Services, new_email: str) -> str:
    """The newest change link sent to `new_email`."""
    return latest_link(conn, svc, new_email, "email_change")


def change_code(conn: psycopg.Connection, svc: Services, new_email: str) -> str:
    return latest_code(conn, svc, new_email, "email_change")


def undo_link(conn: psycopg.Connection, svc: Services, old_email: str) -> str:
    """The newest undo link sent to `old_email`."""
    return latest_link(conn, svc, old_email, "email_revert")


def delete_link(conn: psycopg.Connection, svc: Services, email: str) -> str:
    return latest_link(conn, svc, email, "account_delete")


def delete_code(conn: psycopg.Connection, svc: Services, email: str) -> str:
    return latest_code(conn, svc, email, "account_delete")


def changed(api: ApiCaller, conn: psycopg.Connection, svc: Services, email: str,
            password: str, new_email: str) -> str:
    """Change `email` to `new_email` and confirm it from the new mailbox; the undo link."""
    request_change(api, email, password, new_email)
    response = api.post("/email-changes/confirm", {"token": change_link(conn, svc, new_email)})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json() == {"email": new_email, "previous_email": email}
    return undo_link(conn, svc, email)


def logs_in(api: ApiCaller, email: str, password: str) -> bool:
    response = api.post("/sessions", {"email": email, "password": password})
    assert response.status_code in (200, 401), response.get_data(as_text=True)
    return response.status_code == 200


def web_session(conn: psycopg.Connection, svc: Services, email: str, password: str) -> str:
    """A signed-in browser's session token (as the login page would give it)."""
    user = actions.authenticate(conn, svc, email=email, password=password)
    return actions.start_session(conn, svc, user=user, user_agent="test browser")


def session_alive(conn: psycopg.Connection, svc: Services, token: str) -> bool:
    return actions.current_session(conn, svc, token) is not None


def account_email(conn: psycopg.Connection, user_id: int) -> str | None:
    """The address the account holds now (None: it is gone)."""
    row = conn.execute("SELECT email FROM users WHERE id = %s", (user_id,)).fetchone()
    return row[0] if row else None


def user_id_of(conn: psycopg.Connection, email: str) -> int:
    row = conn.execute("SELECT id FROM users WHERE email = %s", (email,)).fetchone()
    assert row is not None, f"no account for {email}"
    return int(row[0])


def queued_to(conn: psycopg.Connection, email: str) -> list[tuple[str, str | None]]:
    """(template, purpose) of every email queued for `email`, oldest first."""
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT template, purpose FROM email_jobs WHERE kind = 'email' AND recipient = %s"
        " ORDER BY id", (email,))]


def claims_of(conn: psycopg.Connection, email: str, purpose: str) -> list[TokenClaims]:
    """The claims of every `purpose` email ever queued for `email`, oldest first."""
    return [TokenClaims(r[0], purpose, r[1], r[2]) for r in conn.execute(
        "SELECT user_id, token_version, issued_at FROM email_jobs"
        " WHERE recipient = %s AND purpose = %s ORDER BY id", (email, purpose))]
