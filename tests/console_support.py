"""Helpers for the operator console's tests: operators, signing in, forms' CSRF tokens."""

from __future__ import annotations

import re
from html import unescape

import psycopg
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from authsvc.accounts.users import User
from authsvc.clock import FrozenClock
from authsvc.operators import roles
from authsvc.services import Services
from tests.accounts_support import stored_user
from tests.link_support import latest_code
from tests.pages_support import PASSWORD, make_account

OPERATOR = "op@example.com"
_CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')
_CSRF_BUTTON = re.compile(r'type="hidden" name="csrf_token" value="([^"]+)"')


def make_operator(conn: psycopg.Connection, svc: Services, email: str = OPERATOR) -> User:
    """A confirmed account with PASSWORD, given the operator role."""
    make_account(conn, svc, email)
    user = stored_user(conn, email)
    assert roles.add_operator(conn, user.id, svc.clock())
    return user


def csrf_of(client: FlaskClient, path: str, ip: str = "127.0.0.1") -> str:
    """The CSRF token of the first form on the console page at `path`."""
    page = client.get(path, environ_base={"REMOTE_ADDR": ip})
    html = page.get_data(as_text=True)
    match = _CSRF.search(html) or _CSRF_BUTTON.search(html)
    assert match, f"no CSRF token on {path} ({page.status_code})"
    return unescape(match.group(1))


def post(client: FlaskClient, path: str, data: dict[str, str] | None = None, *,
         form_page: str | None = None, ip: str = "127.0.0.1") -> TestResponse:
    """POST like a browser that loaded `form_page` (or `path`) first: its CSRF token included."""
    token = csrf_of(client, form_page or path, ip)
    return client.post(path, data={"csrf_token": token, **(data or {})},
                       environ_base={"REMOTE_ADDR": ip})


def password_step(client: FlaskClient, email: str = OPERATOR, password: str = PASSWORD,
                  ip: str = "127.0.0.1") -> TestResponse:
    return post(client, "/admin/login", {"email": email, "password": password}, ip=ip)


def code_step(client: FlaskClient, code: str, ip: str = "127.0.0.1") -> TestResponse:
    return post(client, "/admin/login/code", {"code": code}, ip=ip)


def emailed_code(conn: psycopg.Connection, svc: Services, email: str = OPERATOR) -> str:
    """The code the newest console sign-in email will carry (the worker mints it the same way)."""
    return latest_code(conn, svc, email, "console_login")


def console_sign_in(client: FlaskClient, conn: psycopg.Connection, svc: Services,
                    email: str = OPERATOR, ip: str = "127.0.0.1") -> None:
    """Both steps; the client then carries a console session."""
    first = password_step(client, email, ip=ip)
    assert first.status_code == 303 and first.headers["Location"] == "/admin/login/code", \
        first.get_data(as_text=True)
    second = code_step(client, emailed_code(conn, svc, email), ip=ip)
    assert second.status_code == 303 and second.headers["Location"] == "/admin/", \
        second.get_data(as_text=True)


def signed_in_console(app, conn: psycopg.Connection, svc: Services,  # type: ignore[no-untyped-def]
                      email: str = OPERATOR) -> FlaskClient:
    client = app.test_client()
    console_sign_in(client, conn, svc, email)
    return client


def advance(clock: FrozenClock, minutes: float) -> None:
    clock.advance(minutes * 60)
