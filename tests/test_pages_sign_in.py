"""SPEC §13's pages: /login's "Email me a sign-in link", /sign-in and /sign-in/code.

A scanner's GET and HEAD consume nothing; only the button's POST signs in,
under a session id the browser never held before.
"""

from __future__ import annotations

import logging

from flask.testing import FlaskClient

from authsvc.accounts import actions
from tests.link_support import latest_code, latest_link
from tests.pages_support import (
    PASSWORD,
    make_account,
    sign_in,
    submit,
    submit_on_link_page,
    text_of,
)

CHOSEN = "a fresh passphrase 44"


def _session_row_ids(conn) -> set[int]:
    return {r[0] for r in conn.execute("SELECT id FROM web_sessions")}


def _session_cookie(client: FlaskClient) -> str | None:
    cookie = client.get_cookie("session")
    return cookie.value if cookie else None


def test_login_offers_a_sign_in_link_and_the_request_answers_the_same_for_everyone(
    client, conn, svc
):
    make_account(conn, svc)
    login = client.get("/login")
    assert "Email me a sign-in link" in text_of(login)
    assert 'formaction="/sign-in/request"' in login.get_data(as_text=True)
    answers = set()
    for email in ("ann@example.com", "nobody@example.com"):
        # The login form's button posts the whole form there; the password is ignored.
        answer = submit(client, "/sign-in/request", {"email": email, "password": ""},
                        form_page="/login")
        answers.add((answer.status_code, answer.headers["Location"]))
    assert answers == {(303, "/check-email?sent=sign_in")}
    page = client.get("/check-email?sent=sign_in")
    assert "a link that signs you in is on its way" in text_of(page)
    assert "expires in 15 minutes" in text_of(page)
    assert 'href="/sign-in/code"' in page.get_data(as_text=True)
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE template = 'sign_in'"
                        " AND recipient = 'ann@example.com'").fetchone() == (1,)


def test_a_scanner_consumes_nothing_and_the_button_signs_in_under_a_new_session(
    app, conn, svc
):
    ann = make_account(conn, svc)
    actions.request_sign_in(conn, svc, email=ann)
    token = latest_link(conn, svc, ann, "sign_in")
    for _ in range(3):  # prefetching scanners
        scanner = app.test_client()
        page = scanner.get(f"/sign-in?token={token}")
        assert scanner.head(f"/sign-in?token={token}").status_code == 200
        assert page.status_code == 200
        assert page.headers["Cache-Control"] == "no-store"
        # An auto-submitting scanner finds a form with no script and a CSRF token
        # it has no session for: posting the bare form signs nobody in.
        assert "<script" not in page.get_data(as_text=True)
        assert scanner.post("/sign-in", data={"token": token}).status_code == 400
    assert "Sign in as ann@example.com" in text_of(page)
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (0,)

    person = app.test_client()
    sign_in(person, ann)  # the browser already holds a session (or a planted one)
    before_ids, before_cookie = _session_row_ids(conn), _session_cookie(person)
    done = submit_on_link_page(person, "/sign-in", "/sign-in", token)
    assert done.status_code == 303 and done.headers["Location"] == "/account"
    after_ids = _session_row_ids(conn)
    assert len(after_ids) == 1 and not after_ids & before_ids  # a new id; the old one ended
    assert _session_cookie(person) != before_cookie
    account = person.get("/account")
    assert account.status_code == 200 and ann in text_of(account)
    again = app.test_client().get(f"/sign-in?token={token}")
    assert again.status_code == 410 and "already used" in text_of(again)


def test_a_discarded_password_is_said_and_a_new_one_may_be_chosen(
    app, client, conn, svc, caplog
):
    caplog.set_level(logging.INFO, logger="authsvc")  # as in production: every event logged
    ann = make_account(conn, svc, verified=False)
    actions.request_sign_in(conn, svc, email=ann)
    token = latest_link(conn, svc, ann, "sign_in")
    page = client.get(f"/sign-in?token={token}")
    assert "discarded" in text_of(page) and 'name="password"' in page.get_data(as_text=True)
    weak = submit_on_link_page(client, "/sign-in", "/sign-in", token, password="password")
    assert weak.status_code == 422
    done = submit_on_link_page(client, "/sign-in", "/sign-in", token, password=CHOSEN)
    assert done.status_code == 303
    account = client.get("/account")
    assert "The password you just chose is the account's now" in text_of(account)
    [event] = [r for r in caplog.records if r.getMessage() == "signed_in_by_email"]
    assert (event.by, event.account_created, event.password_discarded) == ("link", True, True)
    other = app.test_client()
    assert submit(other, "/login", {"email": ann, "password": PASSWORD}).status_code == 422
    assert submit(other, "/login", {"email": ann, "password": CHOSEN}).status_code == 303


def test_a_proven_account_is_offered_no_password_field(client, conn, svc):
    ann = make_account(conn, svc)
    actions.request_sign_in(conn, svc, email=ann)
    page = client.get(f"/sign-in?token={latest_link(conn, svc, ann, 'sign_in')}")
    assert "discarded" not in text_of(page)
    assert 'name="password"' not in page.get_data(as_text=True)


def test_the_code_page_signs_in_on_another_device(app, conn, svc):
    ann = make_account(conn, svc)
    actions.request_sign_in(conn, svc, email=ann)
    code = latest_code(conn, svc, ann, "sign_in")
    device = app.test_client()
    wrong = submit(device, "/sign-in/code",
                   {"email": ann, "code": "000000" if code != "000000" else "111111"})
    assert wrong.status_code == 422
    assert "That code does not work for this address" in text_of(wrong)
    unknown = submit(device, "/sign-in/code", {"email": "nobody@example.com", "code": code})
    assert (unknown.status_code, text_of(unknown).replace("nobody@example.com", ann)) == (
        wrong.status_code, text_of(wrong))
    done = submit(device, "/sign-in/code", {"email": ann, "code": code})
    assert done.status_code == 303 and done.headers["Location"] == "/account"
    assert device.get("/account").status_code == 200
    used = submit(app.test_client(), "/sign-in/code", {"email": ann, "code": code})
    assert used.status_code == 422


def test_a_replaced_link_offers_a_new_one(app, client, conn, svc):
    ann = make_account(conn, svc)
    actions.request_sign_in(conn, svc, email=ann)
    old = latest_link(conn, svc, ann, "sign_in")
    actions.request_sign_in(conn, svc, email=ann)
    page = client.get(f"/sign-in?token={old}")
    assert page.status_code == 410
    assert "replaced by a newer one" in text_of(page)
    assert 'value="Send a new link"' in page.get_data(as_text=True)
    resent = submit(client, "/links/resend", {"token": old, "purpose": "sign_in"},
                    form_page=f"/sign-in?token={old}")
    assert resent.status_code == 303
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE template = 'sign_in'"
                        " AND recipient = %s", (ann,)).fetchone() == (3,)


def _no_password_account(app, conn, svc) -> FlaskClient:
    """A browser signed in by email to an account created by a sign-in link."""
    actions.sign_up(conn, svc, email="ann@example.com", password=PASSWORD)
    actions.request_sign_in(conn, svc, email="ann@example.com")
    person = app.test_client()
    token = latest_link(conn, svc, "ann@example.com", "sign_in")
    assert submit_on_link_page(person, "/sign-in", "/sign-in", token).status_code == 303
    return person


def test_an_account_with_no_password_changes_its_address_within_ten_minutes_of_a_sign_in(
    app, conn, svc, clock
):
    person = _no_password_account(app, conn, svc)
    page = person.get("/account")
    assert "Your account has no password" in text_of(page)
    assert 'name="current"' not in page.get_data(as_text=True)
    asked = submit(person, "/account/email", {"new_email": "new@example.com"},
                   form_page="/account")
    assert asked.status_code == 303
    assert latest_link(conn, svc, "new@example.com", "email_change")

    clock.advance(11 * 60)
    late = submit(person, "/account/delete/request", {}, form_page="/account")
    assert late.status_code == 422
    assert "needs a sign-in by email from the last 10 minutes" in text_of(late)
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE template = 'account_delete'"
                        ).fetchone() == (0,)


def test_a_password_session_of_an_account_with_no_password_is_not_enough(app, conn, svc):
    """Only a sign-in link or code counts: a session from /login never existed for such an
    account, and a planted row saying 'password' is refused."""
    person = _no_password_account(app, conn, svc)
    conn.execute("UPDATE web_sessions SET started_by = 'password'")
    refused = submit(person, "/account/email", {"new_email": "new@example.com"},
                     form_page="/account")
    assert refused.status_code == 422
