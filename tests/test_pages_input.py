"""Hostile and broken input to the web pages: always a 4xx or a form error, never a 5xx."""

from __future__ import annotations

import re

import pytest

from authsvc.db.connections import create_pool
from authsvc.web.app import create_app
from tests.link_support import latest_link
from tests.pages_support import PASSWORD, csrf_token, make_account, queued, text_of

PAGES = [
    "/",
    "/signup",
    "/login",
    "/logout",
    "/reset",
    "/verify/request",
    "/check-email?sent=signup",
    "/verify?token=bogus",
    "/reset/confirm?token=bogus",
    "/account",
    "/email-change/confirm?token=bogus",
    "/email-change/undo?token=bogus",
    "/email-change/code",
    "/account/delete?token=bogus",
    "/account/delete/code",
]

FORM_POSTS = [
    ("/signup", {"email": "ann@example.com", "password": PASSWORD}),
    ("/login", {"email": "ann@example.com", "password": PASSWORD}),
    ("/reset", {"email": "ann@example.com"}),
    ("/verify/request", {"email": "ann@example.com"}),
    ("/verify", {"token": "x"}),
    ("/reset/confirm", {"token": "x", "password": "a brand new passphrase"}),
    ("/links/resend", {"token": "x", "purpose": "reset"}),
    ("/logout", {}),
    ("/account/password", {"current": PASSWORD, "new": "a brand new passphrase"}),
    ("/account/email", {"new_email": "new@example.com", "current": PASSWORD}),
    ("/account/delete/request", {"current": PASSWORD}),
    ("/email-change/confirm", {"token": "x"}),
    ("/email-change/undo", {"token": "x"}),
    ("/email-change/code", {"email": "ann@example.com", "code": "123456"}),
    ("/account/delete", {"token": "x"}),
    ("/account/delete/code", {"email": "ann@example.com", "code": "123456"}),
]


def assert_security_headers(response) -> None:
    headers = response.headers
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp
    assert "form-action 'self'" in csp
    assert "script-src" not in csp and "unsafe-inline" not in csp


def assert_no_script_or_inline_style(html: str) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"\sstyle\s*=", html, re.IGNORECASE)
    assert not re.search(r"\son[a-z]+\s*=", html, re.IGNORECASE)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_security_headers_and_no_script(client, path):
    response = client.get(path, follow_redirects=True)
    assert response.status_code < 500
    assert_security_headers(response)
    assert response.headers["Cache-Control"] == "no-store"
    assert_no_script_or_inline_style(response.get_data(as_text=True))


def test_signed_in_and_valid_token_pages_send_security_headers(client, conn, svc):
    make_account(conn, svc)
    make_account(conn, svc, "bob@example.com", verified=False)
    token = latest_link(conn, svc, "bob@example.com", "verify")
    csrf = csrf_token(client, "/login")
    client.post(
        "/login", data={"csrf_token": csrf, "email": "ann@example.com", "password": PASSWORD}
    )
    for path in ("/account", "/logout", f"/verify?token={token}"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert_security_headers(response)
        assert response.headers["Cache-Control"] == "no-store"
        assert_no_script_or_inline_style(response.get_data(as_text=True))


def test_stylesheet_is_served_from_self(client):
    response = client.get("/static/pages/pages.css")
    assert response.status_code == 200
    assert response.mimetype == "text/css"
    assert "/static/pages/pages.css" in client.get("/signup").get_data(as_text=True)


@pytest.mark.parametrize(("path", "data"), FORM_POSTS, ids=[p for p, _ in FORM_POSTS])
def test_posts_without_this_sessions_csrf_token_are_refused(app, client, conn, svc, path, data):
    make_account(conn, svc)
    before = conn.execute("SELECT count(*) FROM email_jobs").fetchone()[0]
    client.get("/signup")  # this browser has a session (and a CSRF token) of its own
    refused_tokens = {
        "missing": None,
        "wrong": "not-a-token",
        "other session's": csrf_token(app.test_client(), "/signup"),
    }
    for why, token in refused_tokens.items():
        form = dict(data) if token is None else {**data, "csrf_token": token}
        response = client.post(path, data=form)
        assert response.status_code == 400, why
        assert "This form has expired" in text_of(response), why
        assert_security_headers(response)
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone()[0] == before


def test_auto_posting_scanner_cannot_redeem_a_link(app, conn, svc):
    """A scanner that fetches the page and submits its form without keeping cookies."""
    make_account(conn, svc, verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    scanner = app.test_client(use_cookies=False)
    page = scanner.get(f"/verify?token={token}").get_data(as_text=True)
    found = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', page)
    assert found is not None, "no CSRF token on the link's page"
    scraped = found.group(1)
    submitted = scanner.post("/verify", data={"csrf_token": scraped, "token": token})
    assert submitted.status_code == 400
    person = app.test_client()
    csrf = csrf_token(person, f"/verify?token={token}")
    confirmed = person.post("/verify", data={"csrf_token": csrf, "token": token})
    assert "Email address confirmed" in text_of(confirmed)


LONG_EMAIL = "a" * 64 + "@" + "b" * 231 + ".com"  # 300 characters
BAD_FORMS = {
    "signup missing email": ("/signup", {"password": PASSWORD}),
    "signup missing password": ("/signup", {"email": "ann@example.com"}),
    "signup empty": ("/signup", {}),
    "signup 300-char email": ("/signup", {"email": LONG_EMAIL, "password": PASSWORD}),
    "signup NUL in email": ("/signup", {"email": "ann\x00@example.com", "password": PASSWORD}),
    "signup newline in email": ("/signup", {"email": "ann@exa\nmple.com", "password": PASSWORD}),
    "signup not an email": ("/signup", {"email": "ann", "password": PASSWORD}),
    "signup overlong password": ("/signup", {"email": "ann@example.com", "password": "p" * 300}),
    "signup control chars in password": (
        "/signup",
        {"email": "ann@example.com", "password": "good\x07password"},
    ),
    "signup 60 KB password": ("/signup", {"email": "ann@example.com", "password": "p" * 60_000}),
    "login 300-char email": ("/login", {"email": LONG_EMAIL, "password": PASSWORD}),
    "login missing password": ("/login", {"email": "ann@example.com"}),
    "login overlong password": ("/login", {"email": "ann@example.com", "password": "p" * 5000}),
    "reset 300-char email": ("/reset", {"email": LONG_EMAIL}),
    "reset control chars": ("/reset", {"email": "\x1b[31mann@example.com"}),
    "reset missing email": ("/reset", {}),
    "verify request bad email": ("/verify/request", {"email": "@@"}),
    "verify missing token": ("/verify", {}),
    "verify 10 KB token": ("/verify", {"token": "t" * 10_000}),
    "verify control chars token": ("/verify", {"token": "abc\x00.def"}),
    "reset confirm missing token": ("/reset/confirm", {"password": "a brand new passphrase"}),
    "reset confirm 10 KB token": ("/reset/confirm", {"token": "t" * 10_000, "password": "x"}),
    "resend unknown purpose": ("/links/resend", {"token": "x", "purpose": "admin"}),
    "resend missing everything": ("/links/resend", {}),
    "change password missing fields": ("/account/password", {}),
    "change email missing fields": ("/account/email", {}),
    "change email bad address": ("/account/email", {"new_email": "a<b>@x", "current": "x"}),
    "delete request missing password": ("/account/delete/request", {}),
    "change confirm missing token": ("/email-change/confirm", {}),
    "change confirm 10 KB token": ("/email-change/confirm", {"token": "t" * 10_000}),
    "undo missing token": ("/email-change/undo", {}),
    "undo control chars token": ("/email-change/undo", {"token": "abc\x00.def"}),
    "undo overlong password": ("/email-change/undo", {"token": "x", "password": "p" * 5000}),
    "delete missing token": ("/account/delete", {}),
    "delete 10 KB token": ("/account/delete", {"token": "t" * 10_000}),
    "change code bad email": ("/email-change/code", {"email": "@@", "code": "123456"}),
    "change code missing code": ("/email-change/code", {"email": "ann@example.com"}),
    "delete code 10 KB code": ("/account/delete/code", {"email": "a@b.com", "code": "1" * 10_000}),
}


@pytest.mark.parametrize(("path", "data"), BAD_FORMS.values(), ids=BAD_FORMS.keys())
def test_bad_form_input_is_a_4xx_never_a_5xx(client, conn, svc, path, data):
    make_account(conn, svc)
    before = conn.execute("SELECT count(*) FROM email_jobs").fetchone()[0]
    response = client.post(path, data={"csrf_token": csrf_token(client, "/signup"), **data})
    assert 400 <= response.status_code < 500 or response.headers.get("Location") == "/login"
    assert_security_headers(response)
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone()[0] == before


@pytest.mark.parametrize(
    ("email", "message"),
    [
        (LONG_EMAIL, "The email address is longer than 254 characters."),
        ("ann\x00@example.com", "contains invalid characters before the @-sign: U+0000."),
        ("ann", "An email address must have an @-sign."),
        ("Ann <ann@example.com>", "A display name and angle brackets"),
        ("ann(work)@example.com", "invalid characters before the @-sign: '(', ')'."),
        ("ann\u200b@example.com", "unsafe characters: ZERO WIDTH SPACE."),
        ("", "Enter your email address."),
    ],
)
def test_email_problems_are_explained_on_the_form(client, email, message):
    token = csrf_token(client, "/reset")
    response = client.post("/reset", data={"csrf_token": token, "email": email})
    assert response.status_code == 422
    assert message in text_of(response)


def test_typed_markup_is_escaped_when_the_form_comes_back(client):
    token = csrf_token(client, "/signup")
    evil = '"><script>alert(1)</script>'
    response = client.post(
        "/signup", data={"csrf_token": token, "email": evil, "password": PASSWORD}
    )
    assert response.status_code == 422
    html = response.get_data(as_text=True)
    assert "<script>" not in html
    assert "&lt;script&gt;" in html


def test_oversized_and_odd_bodies_are_4xx(client):
    token = csrf_token(client, "/signup")
    huge = client.post("/signup", data={"csrf_token": token, "email": "a" * 1_000_000})
    assert huge.status_code == 413
    assert_security_headers(huge)
    as_json = client.post("/signup", json={"csrf_token": token, "email": "ann@example.com"})
    assert as_json.status_code == 400
    not_utf8 = client.post(
        "/signup",
        data=b"csrf_token=" + token.encode() + b"&email=%FF%FE%00&password=%C3%28",
        content_type="application/x-www-form-urlencoded",
    )
    assert 400 <= not_utf8.status_code < 500
    assert client.put("/signup").status_code == 405


@pytest.mark.parametrize(
    "query",
    ["token=" + "t" * 100_000, "token=%00%01%02", "token=a&token=b", "token=%FF%FE", "nothing=1"],
    ids=["100KB", "control", "repeated", "not-utf8", "missing"],
)
@pytest.mark.parametrize("path", ["/verify", "/reset/confirm"])
def test_odd_token_query_strings_are_invalid_links(client, path, query):
    response = client.get(f"{path}?{query}")
    assert response.status_code == 400
    assert "This link is not valid" in text_of(response)
    assert response.headers["Cache-Control"] == "no-store"


def test_unknown_email_and_known_email_share_the_same_limits(client, conn, svc):
    make_account(conn, svc)
    for email in ("ann@example.com", "nobody@example.com"):
        for _ in range(svc.settings.rate_limit_email.limit + 1):
            token = csrf_token(client, "/reset")
            assert (
                client.post("/reset", data={"csrf_token": token, "email": email}).status_code == 303
            )
    # Each purpose has its own budget: signing up used a verification email,
    # not one of the reset emails.
    assert queued(conn, "ann@example.com", "reset") == svc.settings.rate_limit_email.limit


def test_database_outage_shows_a_try_again_page(settings, database_url, clock, passwords):
    closed = create_pool(database_url, min_size=1, max_size=1)
    closed.close()
    app = create_app(settings, pool=closed, clock=clock, passwords=passwords)
    client = app.test_client()
    token = csrf_token(client, "/signup")
    response = client.post("/signup", data={"csrf_token": token, "email": "ann@example.com"})
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert "try again in a moment" in text_of(response)
    assert "Traceback" not in response.get_data(as_text=True)
    assert_security_headers(response)
