"""SPEC §5: every /api/v1 endpoint's success path and its domain errors, on real PostgreSQL."""

from __future__ import annotations

import psycopg
import pytest

from authsvc.clock import FrozenClock
from authsvc.services import Services
from tests.api_support import (
    ALLOWED_REDIRECT,
    ApiCaller,
    assert_documented,
    assert_problem,
    job_count,
)
from tests.link_support import latest_claims

PASSWORD = "correct horse battery"


def _signed_up(api: ApiCaller, email: str = "ann@example.com") -> None:
    response = api.post("/signups", {"email": email, "password": PASSWORD})
    assert response.status_code == 202, response.get_json()


def _verify_token(conn: psycopg.Connection, svc: Services, email: str = "ann@example.com") -> str:
    return svc.tokens.mint(latest_claims(conn, email, "verify"))


def _reset_token(conn: psycopg.Connection, svc: Services, email: str = "ann@example.com") -> str:
    return svc.tokens.mint(latest_claims(conn, email, "reset"))


def test_signup_queues_verification_with_redirect(api, conn):
    body = {"email": "  Ann@Example.COM ", "password": PASSWORD, "redirect_url": ALLOWED_REDIRECT}
    response = api.post("/signups", body)
    assert response.status_code == 202
    assert response.get_json() == {"status": "verification_sent"}
    assert response.headers["Cache-Control"] == "no-store"
    assert_documented(response, "POST", "/signups")
    row = conn.execute("SELECT template, recipient, payload FROM email_jobs").fetchall()
    # A new account is the app's (SPEC §14), so its redirect applies, the email names the
    # app and is marked the app's own (redeeming it is a flow through the app).
    assert row == [("verify", "ann@example.com",
                    {"redirect_url": ALLOWED_REDIRECT, "app_name": "shop", "own_account": True})]


def test_signup_for_existing_account_answers_the_same(api, conn, svc):
    first = api.post("/signups", {"email": "ann@example.com", "password": PASSWORD})
    api.post("/verifications/confirm", {"token": _verify_token(conn, svc)})
    again = api.post("/signups", {"email": "ann@example.com", "password": "other long passphrase"})
    assert (again.status_code, again.get_data()) == (first.status_code, first.get_data())
    templates = [r[0] for r in conn.execute("SELECT template FROM email_jobs ORDER BY id")]
    assert templates == ["verify", "account_exists"]


def test_signup_with_weak_password_is_422(api, conn):
    response = api.post("/signups", {"email": "ann@example.com", "password": "password"})
    assert_problem(response, 422, "weak_password")
    assert_documented(response, "POST", "/signups")
    assert job_count(conn) == 0


def test_verification_confirm_verifies_once(api, conn, svc):
    _signed_up(api)
    token = _verify_token(conn, svc)
    response = api.post("/verifications/confirm", {"token": token})
    assert response.status_code == 200
    assert response.get_json() == {"email": "ann@example.com", "verified": True}
    assert_documented(response, "POST", "/verifications/confirm")
    again = api.post("/verifications/confirm", {"token": token})
    assert_problem(again, 410, "token_used")
    assert_documented(again, "POST", "/verifications/confirm")


def test_verification_request_sends_a_new_link_and_supersedes_the_old(api, conn, svc):
    _signed_up(api)
    old = _verify_token(conn, svc)
    response = api.post("/verifications", {"email": "ann@example.com"})
    assert (response.status_code, response.get_json()) == (202, {"status": "accepted"})
    assert_documented(response, "POST", "/verifications")
    assert job_count(conn, "ann@example.com") == 2
    assert_problem(api.post("/verifications/confirm", {"token": old}), 410, "token_superseded")
    new = _verify_token(conn, svc)
    # Anyone may ask for a resend, so its confirmer chooses the password (SPEC §4a).
    assert_problem(api.post("/verifications/confirm", {"token": new}), 422, "password_required")
    body = {"token": new, "password": "chosen at confirm 1"}
    assert api.post("/verifications/confirm", body).status_code == 200


def test_password_reset_flow_changes_password_and_login_follows(api, conn, svc):
    _signed_up(api)
    response = api.post(
        "/password-resets", {"email": "ann@example.com", "redirect_url": ALLOWED_REDIRECT}
    )
    assert (response.status_code, response.get_json()) == (202, {"status": "accepted"})
    assert_documented(response, "POST", "/password-resets")

    confirm = api.post(
        "/password-resets/confirm",
        {"token": _reset_token(conn, svc), "password": "a brand new passphrase"},
    )
    assert (confirm.status_code, confirm.get_json()) == (200, {"status": "password_changed"})
    assert_documented(confirm, "POST", "/password-resets/confirm")

    old_login = api.post("/sessions", {"email": "ann@example.com", "password": PASSWORD})
    assert_problem(old_login, 401, "invalid_credentials")
    login = api.post(
        "/sessions", {"email": "ANN@example.com", "password": "a brand new passphrase"}
    )
    assert login.status_code == 200
    user = login.get_json()["user"]
    # Completing a reset proves the mailbox, so it verifies the address too.
    assert user["email"] == "ann@example.com" and user["email_verified"] is True
    assert isinstance(user["id"], int)
    assert_documented(login, "POST", "/sessions")
    templates = [r[0] for r in conn.execute("SELECT template FROM email_jobs ORDER BY id")]
    assert templates == ["verify", "reset", "password_changed"]


def test_reset_confirm_with_weak_password_keeps_the_link_usable(api, conn, svc):
    _signed_up(api)
    api.post("/password-resets", {"email": "ann@example.com"})
    token = _reset_token(conn, svc)
    weak = api.post("/password-resets/confirm", {"token": token, "password": "ann@example.com"})
    assert_problem(weak, 422, "weak_password")
    assert_documented(weak, "POST", "/password-resets/confirm")
    ok = api.post(
        "/password-resets/confirm", {"token": token, "password": "a brand new passphrase"}
    )
    assert ok.status_code == 200


def test_unconfirmed_account_cannot_log_in_and_looks_like_a_wrong_password(api, conn, svc):
    """Before: 200 with email_verified false, which told anyone the address was unproven."""
    _signed_up(api)
    right = api.post("/sessions", {"email": "ann@example.com", "password": PASSWORD})
    wrong = api.post("/sessions", {"email": "ann@example.com", "password": "not it at all"})
    assert_problem(right, 401, "invalid_credentials")
    assert (right.status_code, right.get_data()) == (wrong.status_code, wrong.get_data())
    api.post("/verifications/confirm", {"token": _verify_token(conn, svc)})
    login = api.post("/sessions", {"email": "ann@example.com", "password": PASSWORD})
    assert login.status_code == 200
    assert login.get_json()["user"]["email_verified"] is True


@pytest.mark.parametrize("email", ["ann@example.com", "nobody@example.com"])
def test_wrong_password_is_invalid_credentials_known_or_not(api, email):
    _signed_up(api)
    response = api.post("/sessions", {"email": email, "password": "not the password"})
    assert_problem(response, 401, "invalid_credentials")
    assert_documented(response, "POST", "/sessions")


def test_failed_logins_over_the_limit_get_429_with_retry_after(api, app_with):
    limited = ApiCaller(app_with(AUTHSVC_RATE_LIMIT_LOGIN="3/15m").test_client(), api.app, api.key)
    for _ in range(3):
        assert (
            limited.post(
                "/sessions", {"email": "x@example.com", "password": "wrong one!"}
            ).status_code
            == 401
        )
    response = limited.post("/sessions", {"email": "x@example.com", "password": "wrong one!"})
    assert_problem(response, 429, "rate_limited")
    assert int(response.headers["Retry-After"]) > 0
    assert_documented(response, "POST", "/sessions")


def test_app_rate_limit_answers_429_with_retry_after(api, app_with):
    limited = ApiCaller(app_with(AUTHSVC_RATE_LIMIT_APP="2/1m").test_client(), api.app, api.key)
    for _ in range(2):
        assert limited.post("/password-resets", {"email": "a@example.com"}).status_code == 202
    response = limited.post("/password-resets", {"email": "a@example.com"})
    assert_problem(response, 429, "rate_limited")
    assert 0 < int(response.headers["Retry-After"]) <= 60
    assert_documented(response, "POST", "/password-resets")


@pytest.mark.parametrize("path", ["/verifications/confirm", "/password-resets/confirm"])
@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda t: "", id="empty"),
        pytest.param(lambda t: t[: len(t) // 2], id="truncated"),
        pytest.param(lambda t: t[:-3] + ("AAA" if not t.endswith("AAA") else "BBB"), id="tampered"),
        pytest.param(lambda t: t + "x" * 600, id="oversized"),
        pytest.param(lambda t: "not-a-token", id="garbage"),
    ],
)
def test_malformed_tokens_are_invalid_token(api, conn, svc, path, mangle):
    _signed_up(api)
    api.post("/password-resets", {"email": "ann@example.com"})
    purpose = "verify" if path.startswith("/verifications") else "reset"
    token = svc.tokens.mint(latest_claims(conn, "ann@example.com", purpose))
    response = api.post(
        path,
        {"token": mangle(token), "password": "a brand new passphrase"}
        if purpose == "reset"
        else {"token": mangle(token)},
    )
    assert_problem(response, 400, "invalid_token")
    assert_documented(response, "POST", path)


def test_token_for_the_other_purpose_is_invalid_token(api, conn, svc):
    _signed_up(api)
    verify_token = _verify_token(conn, svc)
    response = api.post(
        "/password-resets/confirm", {"token": verify_token, "password": "a brand new passphrase"}
    )
    assert_problem(response, 400, "invalid_token")


def test_expired_and_superseded_reset_tokens_are_410(api, conn, svc, clock: FrozenClock):
    _signed_up(api)
    api.post("/password-resets", {"email": "ann@example.com"})
    older = _reset_token(conn, svc)
    clock.advance(60)
    api.post("/password-resets", {"email": "ann@example.com"})
    newer = _reset_token(conn, svc)
    body = {"token": older, "password": "a brand new passphrase"}
    assert_problem(api.post("/password-resets/confirm", body), 410, "token_superseded")
    clock.advance(svc.settings.reset_ttl)
    expired = api.post(
        "/password-resets/confirm", {"token": newer, "password": "a brand new passphrase"}
    )
    assert_problem(expired, 410, "token_expired")
    assert_documented(expired, "POST", "/password-resets/confirm")


def test_used_reset_token_is_token_used(api, conn, svc):
    _signed_up(api)
    api.post("/password-resets", {"email": "ann@example.com"})
    token = _reset_token(conn, svc)
    body = {"token": token, "password": "a brand new passphrase"}
    assert api.post("/password-resets/confirm", body).status_code == 200
    assert_problem(api.post("/password-resets/confirm", body), 410, "token_used")


@pytest.mark.parametrize("path", ["/password-resets", "/verifications"])
def test_known_and_unknown_emails_get_identical_answers(api, conn, path):
    _signed_up(api, "known@example.com")
    known = api.post(path, {"email": "known@example.com"})
    unknown = api.post(path, {"email": "unknown@example.com"})
    assert known.status_code == unknown.status_code == 202
    assert known.get_data() == unknown.get_data()
    ignore = {"Date"}
    assert [h for h in known.headers if h[0] not in ignore] == [
        h for h in unknown.headers if h[0] not in ignore
    ]


def test_over_the_email_limit_answers_the_same_and_sends_nothing(api, conn, svc):
    _signed_up(api)
    limit = svc.settings.rate_limit_email.limit
    answers = {
        api.post("/password-resets", {"email": "ann@example.com"}).get_data()
        for _ in range(limit + 2)
    }
    assert len(answers) == 1
    # Budgets are per purpose: the signup's verification email did not use a reset one.
    assert job_count(conn, "ann@example.com") == limit + 1
