"""The web pages (SPEC §6) through Flask's test client, CSRF on, real PostgreSQL."""

from __future__ import annotations

import pytest

from tests.accounts_support import stored_user
from tests.link_support import latest_link
from tests.pages_support import (
    PASSWORD,
    csrf_token,
    make_account,
    queued,
    sign_in,
    submit,
    submit_on_link_page,
    text_of,
)


def test_signup_queues_one_verification_and_answers_generically(client, conn):
    response = submit(client, "/signup", {"email": " Ann@Example.com ", "password": PASSWORD})
    assert response.status_code == 303
    page = client.get(response.headers["Location"])
    # Not "we sent": the per-address email limit may have held it back (issue 10).
    assert "A link to confirm your email address is on its way" in text_of(page)
    assert "It expires in 24 hours." in text_of(page)
    assert queued(conn, "ann@example.com", "verify") == 1


def test_signup_for_taken_address_looks_the_same(client, conn, svc):
    make_account(conn, svc)
    fresh = submit(client, "/signup", {"email": "bob@example.com", "password": PASSWORD})
    taken = submit(client, "/signup", {"email": "ann@example.com", "password": PASSWORD})
    assert (fresh.status_code, fresh.headers["Location"]) == (
        taken.status_code,
        taken.headers["Location"],
    )
    assert queued(conn, "ann@example.com", "account_exists") == 1


def test_signup_weak_password_is_a_form_error(client, conn):
    response = submit(client, "/signup", {"email": "ann@example.com", "password": "password"})
    assert response.status_code == 422
    assert "This password is too common; choose another." in text_of(response)
    assert 'value="ann@example.com"' in response.get_data(as_text=True)
    assert queued(conn, "ann@example.com") == 0


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_opening_verify_link_many_times_never_consumes_it(client, conn, svc, method):
    make_account(conn, svc, verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    for _ in range(20):
        opened = client.open(f"/verify?token={token}", method=method)
        assert opened.status_code == 200
        assert opened.headers["Cache-Control"] == "no-store"
    assert stored_user(conn, "ann@example.com").email_verified_at is None

    page = client.get(f"/verify?token={token}")
    assert "Confirm that ann@example.com is your address." in text_of(page)
    confirmed = submit(client, "/verify", {"token": token}, form_page=f"/verify?token={token}")
    assert confirmed.status_code == 200
    assert "Email address confirmed" in text_of(confirmed)
    assert stored_user(conn, "ann@example.com").email_verified_at is not None

    again = client.get(f"/verify?token={token}")
    assert again.status_code == 410
    assert "This link was already used" in text_of(again)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_opening_reset_link_many_times_never_consumes_it(client, conn, svc, method):
    make_account(conn, svc)
    submit(client, "/reset", {"email": "ann@example.com"})
    token = latest_link(conn, svc, "ann@example.com", "reset")
    for _ in range(20):
        opened = client.open(f"/reset/confirm?token={token}", method=method)
        assert opened.status_code == 200
        assert opened.headers["Cache-Control"] == "no-store"

    changed = submit_on_link_page(client, "/reset/confirm", "/reset/confirm", token,
                                  password="a brand new passphrase")
    assert changed.status_code == 303
    assert changed.headers["Location"] == "/login"
    login_page = client.get("/login")
    assert "Your password was changed. Log in with your new password." in text_of(login_page)
    # No auto-login after a reset.
    assert client.get("/account").headers["Location"] == "/login"
    logged_in = submit(
        client, "/login", {"email": "ann@example.com", "password": "a brand new passphrase"}
    )
    assert logged_in.headers["Location"] == "/account"


def test_reset_weak_password_keeps_the_link_usable(client, conn, svc):
    make_account(conn, svc)
    submit(client, "/reset", {"email": "ann@example.com"})
    token = latest_link(conn, svc, "ann@example.com", "reset")
    page = f"/reset/confirm?token={token}"
    weak = submit(client, "/reset/confirm", {"token": token, "password": "short"}, form_page=page)
    assert weak.status_code == 422
    assert "Use at least 8 characters." in text_of(weak)
    good = submit(
        client, "/reset/confirm", {"token": token, "password": "long enough now"}, form_page=page
    )
    assert good.status_code == 303


def test_reset_request_known_and_unknown_look_identical(client, conn, svc):
    make_account(conn, svc)
    known = submit(client, "/reset", {"email": "ann@example.com"})
    unknown = submit(client, "/reset", {"email": "nobody@example.com"})
    assert known.status_code == unknown.status_code == 303
    assert known.headers["Location"] == unknown.headers["Location"]
    assert (
        client.get(known.headers["Location"]).data == client.get(unknown.headers["Location"]).data
    )
    assert "a link to choose a new password is on its way" in text_of(
        client.get(known.headers["Location"])
    )
    assert queued(conn, "ann@example.com", "reset") == 1
    assert queued(conn, "nobody@example.com") == 0


def test_superseded_link_says_use_newest_and_resends_in_one_click(client, conn, svc):
    make_account(conn, svc)
    submit(client, "/reset", {"email": "ann@example.com"})
    older = latest_link(conn, svc, "ann@example.com", "reset")
    submit(client, "/reset", {"email": "ann@example.com"})

    page = client.get(f"/reset/confirm?token={older}")
    assert page.status_code == 410
    assert page.headers["Cache-Control"] == "no-store"
    assert "This link was replaced by a newer one" in text_of(page)
    assert "Use the link in the most recent email." in text_of(page)
    assert "ann@example.com" not in page.get_data(as_text=True)

    before = queued(conn, "ann@example.com", "reset")
    resent = submit_on_link_page(client, "/links/resend", "/reset/confirm", older, purpose="reset")
    assert resent.status_code == 303
    assert queued(conn, "ann@example.com", "reset") == before + 1
    newest = latest_link(conn, svc, "ann@example.com", "reset")
    assert client.get(f"/reset/confirm?token={newest}").status_code == 200


def test_expired_verify_link_offers_resend(client, conn, svc, clock):
    make_account(conn, svc, verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    clock.advance(svc.settings.verify_ttl)
    page = client.get(f"/verify?token={token}")
    assert page.status_code == 410
    assert "This link expired" in text_of(page)
    assert "Send a new one" in text_of(page) or "Send a new link" in text_of(page)

    resent = submit(
        client,
        "/links/resend",
        {"token": token, "purpose": "verify"},
        form_page=f"/verify?token={token}",
    )
    assert resent.status_code == 303
    assert "a new link is on its way" in text_of(client.get(resent.headers["Location"]))
    fresh = latest_link(conn, svc, "ann@example.com", "verify")
    confirmed = submit(client, "/verify", {"token": fresh, "password": "chosen at confirm 1"},
                       form_page=f"/verify?token={fresh}")
    assert "Email address confirmed" in text_of(confirmed)


def test_invalid_link_explains_without_resend_or_account_hints(client, conn, svc):
    make_account(conn, svc, verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    for url in (f"/verify?token={token[:-4]}", "/verify", f"/reset/confirm?token={token}"):
        page = client.get(url)
        assert page.status_code == 400, url
        assert page.headers["Cache-Control"] == "no-store"
        assert "This link is not valid" in text_of(page)
        assert "/links/resend" not in page.get_data(as_text=True)


def test_resend_with_forged_token_sends_nothing(client, conn, svc):
    make_account(conn, svc)
    before = queued(conn, "ann@example.com")
    forged = submit(
        client,
        "/links/resend",
        {"token": "eyJ1c2VyIjoxfQ.forged", "purpose": "reset"},
        form_page="/reset",
    )
    assert forged.status_code == 400
    assert queued(conn, "ann@example.com") == before


def test_login_wrong_password_then_locked_out(client, conn, svc):
    make_account(conn, svc)
    limit = svc.settings.rate_limit_login.limit
    for _ in range(limit):
        wrong = submit(
            client, "/login", {"email": "ann@example.com", "password": "not my password"}
        )
        assert wrong.status_code == 422
        assert "The email address or password is wrong" in text_of(wrong)
    locked = submit(client, "/login", {"email": "ann@example.com", "password": PASSWORD})
    assert locked.status_code == 429
    assert int(locked.headers["Retry-After"]) > 0
    assert "Too many attempts" in text_of(locked)


def test_account_shows_email_and_verification_state(client, conn, svc):
    sign_in(client, make_account(conn, svc))
    page = client.get("/account")
    assert page.status_code == 200
    assert "ann@example.com" in text_of(page)
    assert "Confirmed on" in text_of(page)


def test_password_change_ends_every_session(app, conn, svc):
    make_account(conn, svc)
    here, elsewhere = app.test_client(), app.test_client()
    for browser in (here, elsewhere):
        submit(browser, "/login", {"email": "ann@example.com", "password": PASSWORD})
        assert browser.get("/account").status_code == 200

    changed = submit(
        here,
        "/account/password",
        {"current": PASSWORD, "new": "a brand new passphrase"},
        form_page="/account",
    )
    assert changed.headers["Location"] == "/login"
    assert "logged out everywhere" in text_of(here.get("/login"))
    assert here.get("/account").headers["Location"] == "/login"

    ended = elsewhere.get("/account")
    assert ended.status_code == 303
    assert "Your session ended" in text_of(elsewhere.get(ended.headers["Location"]))
    assert (
        submit(
            here, "/login", {"email": "ann@example.com", "password": "a brand new passphrase"}
        ).headers["Location"]
        == "/account"
    )


@pytest.mark.parametrize(
    ("current", "new", "message"),
    [
        ("wrong current password", "a brand new passphrase", "That is not your current password."),
        (PASSWORD, "password1", "This password is too common; choose another."),
        (PASSWORD, "ann@example.com", "The password cannot be your email address."),
    ],
)
def test_change_password_errors_keep_the_session(client, conn, svc, current, new, message):
    sign_in(client, make_account(conn, svc))
    refused = submit(
        client, "/account/password", {"current": current, "new": new}, form_page="/account"
    )
    assert refused.status_code == 422
    assert message in text_of(refused)
    assert client.get("/account").status_code == 200


def test_logout_needs_a_click_and_csrf(client, conn, svc):
    sign_in(client, make_account(conn, svc))
    shown = client.get("/logout")
    assert shown.status_code == 200
    assert "Log out" in text_of(shown)
    assert client.get("/account").status_code == 200  # GET signed nobody out
    assert client.post("/logout").status_code == 400
    assert client.get("/account").status_code == 200
    out = submit(client, "/logout", {})
    assert out.headers["Location"] == "/login"
    assert client.get("/account").headers["Location"] == "/login"


def test_form_posts_are_limited_per_client_ip(app_with, conn):
    client = app_with(AUTHSVC_RATE_LIMIT_IP="3/15m").test_client()
    token = csrf_token(client, "/reset")
    statuses = [
        client.post("/reset", data={"csrf_token": token, "email": f"p{i}@example.com"}).status_code
        for i in range(4)
    ]
    assert statuses == [303, 303, 303, 429]
    limited = client.post("/reset", data={"csrf_token": token, "email": "p@example.com"})
    assert limited.status_code == 429
    assert 0 < int(limited.headers["Retry-After"]) <= 900
    assert "Too many attempts" in text_of(limited)
    # Another client address is not affected.
    other = client.post(
        "/reset",
        data={"csrf_token": token, "email": "p@example.com"},
        environ_base={"REMOTE_ADDR": "10.0.0.9"},
    )
    assert other.status_code == 303


def test_resend_with_a_used_link_sends_nothing(client, conn, svc):
    make_account(conn, svc, verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    submit(client, "/verify", {"token": token}, form_page=f"/verify?token={token}")
    before = queued(conn, "ann@example.com")
    refused = submit(
        client, "/links/resend", {"token": token, "purpose": "verify"}, form_page="/verify/request"
    )
    assert refused.status_code == 410
    assert "This link was already used" in text_of(refused)
    assert queued(conn, "ann@example.com") == before


def test_an_unconfirmed_account_cannot_log_in_and_the_page_looks_like_a_wrong_password(
    app, conn, svc
):
    """Before: the owner-to-be (or whoever signed up) was signed in before any proof."""
    make_account(conn, svc, verified=False)
    right, wrong = app.test_client(), app.test_client()
    with_right = submit(right, "/login", {"email": "ann@example.com", "password": PASSWORD})
    with_wrong = submit(wrong, "/login", {"email": "ann@example.com", "password": "not it 12345"})
    assert with_right.status_code == with_wrong.status_code == 422
    assert text_of(with_right) == text_of(with_wrong)
    assert right.get("/account").headers["Location"] == "/login"

    token = latest_link(conn, svc, "ann@example.com", "verify")
    confirmed = submit(right, "/verify", {"token": token}, form_page=f"/verify?token={token}")
    assert "Email address confirmed" in text_of(confirmed)
    again = submit(right, "/login", {"email": "ann@example.com", "password": PASSWORD})
    assert again.status_code == 303
    assert right.get("/account").status_code == 200
