"""SPEC §12 on the web pages: /account's two new forms, and the link and code pages.

GET never acts (it shows what will happen and a button); only the
CSRF-checked POST does. What a person reads is checked, and what happened
(the stored address, the emails queued, who can log in).
"""

from __future__ import annotations

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from authsvc.accounts import links
from tests.address_life_support import (
    account_email,
    change_code,
    change_link,
    delete_code,
    delete_link,
    queued_to,
    undo_link,
    user_id_of,
)
from tests.pages_support import (
    PASSWORD,
    make_account,
    sign_in,
    submit,
    submit_on_link_page,
    text_of,
)

NEW = "a brand new passphrase"


def _change_from_account_page(client: FlaskClient, new_email: str,
                              password: str = PASSWORD) -> TestResponse:
    return submit(client, "/account/email", {"new_email": new_email, "current": password},
                  form_page="/account")


def _link_page_says(app: Flask, url: str, status: int, words: str) -> TestResponse:
    """A link's page as a fresh browser opens it: its status, and the words that explain it."""
    page = app.test_client().get(url)
    assert page.status_code == status
    assert words in text_of(page)
    return page


def test_the_account_page_offers_both_and_a_change_sends_a_link_to_the_new_address(
    client, conn, svc
):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    page = text_of(client.get("/account"))
    assert "Change email address" in page and "Delete account" in page

    answer = _change_from_account_page(client, "New@Example.com")

    assert answer.status_code == 303
    assert "We sent a link to new@example.com" in text_of(client.get("/account"))
    assert queued_to(conn, "new@example.com") == [("email_change", "email_change")]
    assert account_email(conn, user_id_of(conn, ann)) == ann


def test_a_wrong_password_or_the_same_address_is_a_form_error(client, conn, svc):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    wrong = _change_from_account_page(client, "new@example.com", "not my password")
    assert wrong.status_code == 422
    assert "That is not your current password." in text_of(wrong)
    same = _change_from_account_page(client, "ANN@example.com")
    assert same.status_code == 422
    assert "This is already your address." in text_of(same)
    assert queued_to(conn, "new@example.com") == []


def test_the_account_forms_need_a_session(client):
    for path, data in (("/account/email", {"new_email": "a@b.com", "current": PASSWORD}),
                       ("/account/delete/request", {"current": PASSWORD})):
        answer = submit(client, path, data, form_page="/login")
        assert answer.status_code == 303 and answer.headers["Location"] == "/login"


def test_the_change_link_page_shows_both_addresses_and_only_its_post_moves_the_account(
    app, client, conn, svc
):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    _change_from_account_page(client, "new@example.com")
    token = change_link(conn, svc, "new@example.com")

    for _ in range(2):  # a scanner opening the link changes nothing
        page = app.test_client().get(f"/email-change/confirm?token={token}")
        assert app.test_client().head(f"/email-change/confirm?token={token}").status_code == 200
    assert page.status_code == 200
    assert "ann@example.com will sign in with new@example.com" in text_of(page)
    assert 'value="Confirm my new email address"' in page.get_data(as_text=True)
    assert account_email(conn, user_id_of(conn, ann)) == ann

    done = submit_on_link_page(app.test_client(), "/email-change/confirm",
                               "/email-change/confirm", token)
    assert done.status_code == 200
    assert "The account now signs in with new@example.com" in text_of(done)
    _link_page_says(app, f"/email-change/confirm?token={token}", 410, "already confirmed")


def test_the_change_code_page(app, client, conn, svc):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    _change_from_account_page(client, "new@example.com")
    person = app.test_client()
    wrong = submit(person, "/email-change/code", {"email": "new@example.com", "code": "000000"
                   if change_code(conn, svc, "new@example.com") != "000000" else "111111"})
    assert wrong.status_code == 422
    assert "That code does not work for this address" in text_of(wrong)

    done = submit(person, "/email-change/code",
                  {"email": "new@example.com", "code": change_code(conn, svc, "new@example.com")})

    assert done.status_code == 200, text_of(done)
    assert "The account now signs in with new@example.com" in text_of(done)


def test_the_undo_page_says_every_session_ends_and_takes_an_optional_password(
    app, client, conn, svc
):
    ann = make_account(conn, svc)
    ann_id = user_id_of(conn, ann)
    sign_in(client, ann)
    _change_from_account_page(client, "new@example.com")
    submit_on_link_page(app.test_client(), "/email-change/confirm", "/email-change/confirm",
                        change_link(conn, svc, "new@example.com"))
    token = undo_link(conn, svc, ann)

    page = app.test_client().get(f"/email-change/undo?token={token}")
    assert page.status_code == 200
    words = text_of(page)
    assert "new@example.com will sign in with ann@example.com again" in words
    assert "Every signed-in session of the account ends" in words
    assert 'name="password"' in page.get_data(as_text=True)
    assert account_email(conn, ann_id) == "new@example.com"

    person = app.test_client()
    weak = submit_on_link_page(person, "/email-change/undo", "/email-change/undo", token,
                               password="password")
    assert weak.status_code == 422
    assert "too common" in text_of(weak)
    done = submit_on_link_page(person, "/email-change/undo", "/email-change/undo", token,
                               password=NEW)
    assert done.status_code == 200
    assert "signs in with ann@example.com again" in text_of(done)
    assert client.get("/account").status_code == 303  # the owner's own session ended too
    sign_in(client, ann, NEW)


def test_the_deletion_request_from_the_account_page_and_its_link_page(app, client, conn, svc):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    answer = submit(client, "/account/delete/request", {"current": PASSWORD},
                    form_page="/account")
    assert answer.status_code == 303
    assert "Nothing is deleted until it is used" in text_of(client.get("/account"))
    token = delete_link(conn, svc, ann)
    assert app.test_client().get(f"/account/delete?token={token}").status_code == 200
    assert user_id_of(conn, ann)

    done = submit_on_link_page(client, "/account/delete", "/account/delete", token)

    assert done.status_code == 200
    assert "Account deleted" in text_of(done)
    assert conn.execute("SELECT count(*) FROM users").fetchone() == (0,)
    _link_page_says(app, f"/account/delete?token={token}", 400, "This link is not valid")


def test_the_deletion_code_page(app, client, conn, svc):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    submit(client, "/account/delete/request", {"current": PASSWORD}, form_page="/account")
    page = app.test_client().get("/account/delete/code")
    assert "Deleting cannot be undone." in text_of(page)
    done = submit(app.test_client(), "/account/delete/code",
                  {"email": ann, "code": delete_code(conn, svc, ann)})
    assert done.status_code == 200
    assert "Account deleted" in text_of(done)


def test_dead_links_say_what_happened_and_offer_no_resend(app, conn, svc, client):
    ann = make_account(conn, svc)
    sign_in(client, ann)
    _change_from_account_page(client, "first@example.com")
    first = change_link(conn, svc, "first@example.com")
    _change_from_account_page(client, "second@example.com")
    page = _link_page_says(app, f"/email-change/confirm?token={first}", 410,
                           "replaced by a newer one")
    assert "/links/resend" not in page.get_data(as_text=True)
    assert links.check_link(conn, svc, change_link(conn, svc, "second@example.com"),
                            "email_change")
