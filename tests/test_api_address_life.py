"""SPEC §12 through the JSON API: the five endpoints, what they answer and what they refuse.

The attacks are tests/test_security_address_life.py; here, each endpoint's
bad input, its answers to the ordinary cases, and what a person would notice
(emails queued, the stored address, who can sign in).
"""

from __future__ import annotations

import statistics
import time

import pytest

from authsvc.accounts import links
from tests.address_life_support import (
    account_email,
    change_link,
    changed,
    confirmed,
    delete_link,
    logs_in,
    queued_to,
    request_change,
    undo_link,
    user_id_of,
)
from tests.api_support import SIGNUP_PASSWORD, ApiCaller, assert_problem, register_shop_app
from tests.link_support import latest_link

PASSWORD = SIGNUP_PASSWORD
NEW = "a brand new passphrase"


# --- bad input -----------------------------------------------------------------------

@pytest.mark.parametrize(("path", "body", "pointer"), [
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD}, "/new_email"),
    ("/email-changes", {"email": "a@example.com", "new_email": "b@example.com"}, "/password"),
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD,
                        "new_email": "not an address"}, "/new_email"),
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD,
                        "new_email": "Ann <b@example.com>"}, "/new_email"),
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD,
                        "new_email": " A@Example.com "}, "/new_email"),  # the same address
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD,
                        "new_email": "b@example.com", "locale": "not a tag!"}, "/locale"),
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD,
                        "new_email": "b@example.com", "locale": 7}, "/locale"),
    # A sign-in code stands in for a missing password (SPEC §13): one or the other.
    ("/email-changes", {"email": "a@example.com", "sign_in_code": "123456",
                        "password": PASSWORD, "new_email": "b@example.com"}, "/sign_in_code"),
    ("/account-deletions", {"email": "a@example.com", "sign_in_code": "123456",
                            "password": PASSWORD}, "/sign_in_code"),
    ("/email-changes", {"email": "a@example.com", "password": PASSWORD,
                        "new_email": "b@example.com", "extra": 1}, "/extra"),
    ("/email-changes/confirm", {}, "/token"),
    ("/email-changes/confirm", {"token": "t", "email": "a@example.com"}, "/email"),
    ("/email-changes/confirm", {"email": "a@example.com"}, "/code"),
    ("/email-changes/confirm", {"code": "123456"}, "/email"),
    ("/email-changes/confirm", {"token": "t", "password": PASSWORD}, "/password"),
    ("/email-changes/undo", {}, "/token"),
    ("/email-changes/undo", {"token": 5}, "/token"),
    ("/email-changes/undo", {"token": "t", "code": "123456"}, "/code"),
    ("/email-changes/undo", {"token": "t", "password": "x" * 257}, "/password"),
    ("/account-deletions", {"email": "a@example.com"}, "/password"),
    ("/account-deletions", {"email": "a@example.com", "password": PASSWORD,
                            "redirect_url": "https://allowed.example.com/welcome"},
     "/redirect_url"),
    ("/account-deletions", {"email": "a(b)@example.com", "password": PASSWORD}, "/email"),
    ("/account-deletions/confirm", {"token": "t", "code": "1"}, "/code"),
    ("/account-deletions/confirm", {"email": "a@example.com", "code": ["1"]}, "/code"),
])
def test_bad_bodies_are_refused_with_the_member_named(api, path, body, pointer):
    problem = assert_problem(api.post(path, body), 400, "invalid_request")
    assert problem["errors"][0]["pointer"] == "#" + pointer


@pytest.mark.parametrize("path", ["/email-changes", "/email-changes/confirm",
                                  "/email-changes/undo", "/account-deletions",
                                  "/account-deletions/confirm"])
@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"token": "a", "token": "b"}', b"\xff"])
def test_bodies_that_are_not_one_json_object_are_refused(api, path, raw):
    response = api.post(path, data=raw, headers={"Content-Type": "application/json"})
    assert_problem(response, 400, "invalid_request")


def test_a_change_to_the_same_address_is_refused_before_the_password_is_checked(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    body = {"email": ann, "password": "wrong password!", "new_email": "ANN@example.com"}
    assert_problem(api.post("/email-changes", body), 400, "invalid_request")
    assert queued_to(conn, ann) == [("verify", "verify")]


def test_a_redirect_not_on_the_allowlist_is_refused(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    body = {"email": ann, "password": PASSWORD, "new_email": "b@example.com",
            "redirect_url": "https://evil.example/steal"}
    assert_problem(api.post("/email-changes", body), 400, "redirect_not_allowed")
    assert queued_to(conn, "b@example.com") == []


# --- who may ask ---------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/email-changes", "/account-deletions"])
def test_wrong_password_unknown_and_unconfirmed_accounts_answer_alike(api, conn, svc, path):
    confirmed(api, conn, svc, "ann@example.com")
    api.sign_up("unconfirmed@example.com")

    def ask(email: str, password: str) -> bytes:
        body = {"email": email, "password": password}
        if path == "/email-changes":
            body["new_email"] = "elsewhere@example.com"
        response = api.post(path, body)
        assert_problem(response, 401, "invalid_credentials")
        return response.get_data()

    answers = {ask("ann@example.com", "wrong password!"), ask("nobody@example.com", PASSWORD),
               ask("unconfirmed@example.com", PASSWORD)}
    assert len(answers) == 1
    assert queued_to(conn, "elsewhere@example.com") == []


def test_wrong_passwords_count_against_the_login_limit(app_with, conn, svc):
    client = app_with(AUTHSVC_RATE_LIMIT_LOGIN="2/15m").test_client()
    api = ApiCaller(client, *register_shop_app(conn))
    ann = confirmed(api, conn, svc, "ann@example.com")
    body = {"email": ann, "password": "wrong password!", "new_email": "b@example.com"}
    assert api.post("/email-changes", body).status_code == 401
    assert api.post("/account-deletions", {"email": ann, "password": "wrong!!!"}).status_code == 401
    limited = api.post("/email-changes", {**body, "password": PASSWORD})
    assert_problem(limited, 429, "rate_limited")
    assert limited.headers["Retry-After"]
    assert_problem(api.post("/sessions", {"email": ann, "password": PASSWORD}), 429,
                   "rate_limited")


# --- the change, step by step ----------------------------------------------------------

def test_a_change_sends_one_email_to_the_new_address_and_none_to_the_old(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    before = queued_to(conn, ann)
    request_change(api, ann, PASSWORD, "new@example.com")
    assert queued_to(conn, "new@example.com") == [("email_change", "email_change")]
    assert queued_to(conn, ann) == before
    assert logs_in(api, ann, PASSWORD)  # nothing changed yet
    assert not logs_in(api, "new@example.com", PASSWORD)


def test_confirming_moves_the_account_and_sends_one_email_to_the_old_address(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    ann_id = user_id_of(conn, ann)
    request_change(api, ann, PASSWORD, "new@example.com")
    before_old, before_new = queued_to(conn, ann), queued_to(conn, "new@example.com")

    answer = api.post("/email-changes/confirm", {"token": change_link(conn, svc,
                                                                      "new@example.com")})

    assert answer.status_code == 200
    assert answer.get_json() == {"email": "new@example.com", "previous_email": ann}
    assert queued_to(conn, ann)[len(before_old):] == [("email_changed", "email_revert")]
    assert queued_to(conn, "new@example.com") == before_new
    assert account_email(conn, ann_id) == "new@example.com"
    assert logs_in(api, "new@example.com", PASSWORD)
    assert not logs_in(api, ann, PASSWORD)
    # The old address is free: it can sign up afresh.
    confirmed(api, conn, svc, ann, "someone else 66")
    assert logs_in(api, ann, "someone else 66")


def test_an_undo_with_a_password_sets_it_and_sends_only_the_notice(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    undo = changed(api, conn, svc, ann, PASSWORD, "new@example.com")
    before_old, before_new = queued_to(conn, ann), queued_to(conn, "new@example.com")

    answer = api.post("/email-changes/undo", {"token": undo, "password": NEW})

    assert (answer.status_code, answer.get_json()) == (200, {"email": ann})
    assert queued_to(conn, ann) == before_old  # no reset link: the password was chosen
    assert queued_to(conn, "new@example.com")[len(before_new):] == [("email_restored", None)]
    assert logs_in(api, ann, NEW)


def test_an_undo_answers_409_while_a_confirmed_account_holds_the_old_address(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    ann_id = user_id_of(conn, ann)
    undo = changed(api, conn, svc, ann, PASSWORD, "new@example.com")
    confirmed(api, conn, svc, ann, "someone else 66")

    assert_problem(api.post("/email-changes/undo", {"token": undo, "password": NEW}),
                   409, "email_taken")
    assert account_email(conn, ann_id) == "new@example.com"
    assert logs_in(api, ann, "someone else 66")
    # The link still stands: once that account is gone, it works.
    api.post("/account-deletions", {"email": ann, "password": "someone else 66"})
    assert api.post("/account-deletions/confirm",
                    {"token": delete_link(conn, svc, ann)}).status_code == 200
    assert api.post("/email-changes/undo", {"token": undo, "password": NEW}).status_code == 200
    assert account_email(conn, ann_id) == ann


def test_an_undo_retires_an_unconfirmed_account_on_the_old_address(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    undo = changed(api, conn, svc, ann, PASSWORD, "new@example.com")
    api.sign_up(ann, "squatter passphrase 5")  # someone signs the freed address up
    squatters_link = latest_link(conn, svc, ann, "verify")

    assert api.post("/email-changes/undo", {"token": undo, "password": NEW}).status_code == 200

    assert logs_in(api, ann, NEW)
    assert not logs_in(api, ann, "squatter passphrase 5")
    assert_problem(api.post("/verifications/confirm", {"token": squatters_link}), 400,
                   "invalid_token")


def test_a_confirm_answers_409_when_a_confirmed_account_took_the_address_meanwhile(
    api, conn, svc
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, PASSWORD, "new@example.com")
    token = change_link(conn, svc, "new@example.com")
    confirmed(api, conn, svc, "new@example.com", "the new holder 77")

    assert_problem(api.post("/email-changes/confirm", {"token": token}), 409, "email_taken")
    assert logs_in(api, ann, PASSWORD)
    assert logs_in(api, "new@example.com", "the new holder 77")


def test_a_password_change_cancels_a_pending_change(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, PASSWORD, "new@example.com")
    token = change_link(conn, svc, "new@example.com")
    assert api.post("/password-resets", {"email": ann}).status_code == 202
    reset = latest_link(conn, svc, ann, "reset")
    body = {"token": reset, "password": NEW}
    assert api.post("/password-resets/confirm", body).status_code == 200

    assert_problem(api.post("/email-changes/confirm", {"token": token}), 410, "token_superseded")
    assert logs_in(api, ann, NEW)


def test_a_change_request_is_replayed_under_its_idempotency_key_without_a_second_email(
    api, conn, svc
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    body = {"email": ann, "password": PASSWORD, "new_email": "new@example.com"}
    first = api.post("/email-changes", body, idempotency_key="change-1")
    again = api.post("/email-changes", body, idempotency_key="change-1")
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.get_data() == first.get_data()
    assert queued_to(conn, "new@example.com") == [("email_change", "email_change")]


def test_the_change_email_budget_is_kept_apart_from_the_other_purposes(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    for _ in range(svc.settings.rate_limit_email.limit):
        request_change(api, ann, PASSWORD, "new@example.com")
    request_change(api, ann, PASSWORD, "new@example.com")  # over the budget: same 202
    assert len(queued_to(conn, "new@example.com")) == svc.settings.rate_limit_email.limit
    # The new address's reset and verification budgets are untouched.
    api.sign_up("new@example.com")
    assert queued_to(conn, "new@example.com")[-1] == ("verify", "verify")


def test_an_undo_link_expires_after_its_lifetime(api, conn, svc, clock):
    ann = confirmed(api, conn, svc, "ann@example.com")
    undo = changed(api, conn, svc, ann, PASSWORD, "new@example.com")
    clock.advance(svc.settings.email_revert_ttl - 1)
    assert links.check_link(conn, svc, undo, "email_revert")
    clock.advance(1)
    assert_problem(api.post("/email-changes/undo", {"token": undo}), 410, "token_expired")


def test_two_changes_in_a_row_keep_both_undo_links(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    first = changed(api, conn, svc, ann, PASSWORD, "second@example.com")
    second = changed(api, conn, svc, "second@example.com", PASSWORD, "third@example.com")
    assert links.check_link(conn, svc, first, "email_revert")
    assert links.check_link(conn, svc, second, "email_revert")
    assert second == undo_link(conn, svc, "second@example.com")


# --- deletion ------------------------------------------------------------------------

def test_a_deletion_sends_one_email_and_its_confirmation_none(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    before = queued_to(conn, ann)
    assert api.post("/account-deletions", {"email": ann, "password": PASSWORD}).get_json() == {
        "status": "confirmation_sent"}
    assert queued_to(conn, ann)[len(before):] == [("account_delete", "account_delete")]
    jobs_before = conn.execute("SELECT count(*) FROM email_jobs").fetchone()
    assert api.post("/account-deletions/confirm",
                    {"token": delete_link(conn, svc, ann)}).get_json() == {"deleted": True}
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() <= jobs_before
    assert not logs_in(api, ann, PASSWORD)


# --- the same answer, in about the same time --------------------------------------------

ROUNDS = 30


def test_a_change_to_a_taken_address_takes_about_as_long_as_one_to_a_free_one(app_with, conn,
                                                                              svc):
    client = app_with(AUTHSVC_RATE_LIMIT_EMAIL="100000/1m", AUTHSVC_RATE_LIMIT_APP="100000/1m",
                      AUTHSVC_RATE_LIMIT_LOGIN="100000/1m").test_client()
    api = ApiCaller(client, *register_shop_app(conn))
    ann = confirmed(api, conn, svc, "ann@example.com")
    confirmed(api, conn, svc, "taken@example.com")

    def timed(new_email: str) -> float:
        start = time.perf_counter()
        response = api.post("/email-changes",
                            {"email": ann, "password": PASSWORD, "new_email": new_email})
        elapsed = (time.perf_counter() - start) * 1000
        assert response.status_code == 202
        return elapsed

    for i in range(3):  # warm both paths up
        timed("taken@example.com")
        timed(f"warm{i}@example.com")
    taken, free = [], []
    for i in range(ROUNDS):  # interleaved, so drift in load hits both alike
        taken.append(timed("taken@example.com"))
        free.append(timed(f"free{i}@example.com"))
    taken_ms, free_ms = statistics.median(taken), statistics.median(free)
    line = f"POST /email-changes: median taken {taken_ms:.2f} ms, free {free_ms:.2f} ms"
    print("\n" + line)
    # Both are one argon2 check and one statement; a gap the size of a second
    # statement's commit would show, a password hash's would fail.
    assert abs(taken_ms - free_ms) < max(5.0, 0.5 * max(taken_ms, free_ms)), line
