"""Helpers for the web-page tests: CSRF tokens from rendered forms, queued links."""

from __future__ import annotations

import re
from html import unescape

import psycopg
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from authsvc.accounts import actions
from authsvc.services import Services
from tests.accounts_support import one_number
from tests.link_support import latest_link

PASSWORD = "correct horse battery"
_CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


def csrf_token(client: FlaskClient, path: str) -> str:
    """The CSRF token of the first form on the page at `path`."""
    page = client.get(path)
    match = _CSRF.search(page.get_data(as_text=True))
    assert match, f"no CSRF token on {path} ({page.status_code})"
    return unescape(match.group(1))


def submit(
    client: FlaskClient, path: str, data: dict[str, str], *, form_page: str | None = None
) -> TestResponse:
    """POST `data` the way a browser would after loading the form (CSRF included)."""
    token = csrf_token(client, form_page or path)
    return client.post(path, data={"csrf_token": token, **data})


def submit_on_link_page(
    client: FlaskClient, action: str, link_page: str, token: str, **fields: str
) -> TestResponse:
    """POST the form of the page a link opens (`link_page`?token=…) to `action`."""
    form_page = f"{link_page}?token={token}"
    return submit(client, action, {"token": token, **fields}, form_page=form_page)


def queued(conn: psycopg.Connection, email: str, template: str | None = None) -> int:
    """How many emails are queued for `email` (of one template, if given)."""
    return one_number(
        conn,
        "SELECT count(*) FROM email_jobs WHERE recipient = %s"
        " AND (%s::text IS NULL OR template = %s)",
        (email, template, template),
    )


def make_account(
    conn: psycopg.Connection,
    svc: Services,
    email: str = "ann@example.com",
    *,
    verified: bool = True,
) -> str:
    """An account with PASSWORD, verified unless asked otherwise; returns its email."""
    actions.sign_up(conn, svc, email=email, password=PASSWORD)
    if verified:
        actions.confirm_verification(conn, svc, token=latest_link(conn, svc, email, "verify"))
    return email


def sign_in(client: FlaskClient, email: str, password: str = PASSWORD) -> TestResponse:
    """Log in through the login form; the client then carries the session cookie."""
    answer = submit(client, "/login", {"email": email, "password": password})
    assert answer.status_code == 303, text_of(answer)
    return answer


def text_of(response: TestResponse) -> str:
    """The page's text with tags removed and whitespace collapsed, as a person reads it."""
    html = response.get_data(as_text=True)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
