"""SPEC §13: signing in by email, played by the attacker first.

Each test is one attack on the sign-in link and code, through the JSON API
(or the use case the pages call) against real PostgreSQL. The victim holds
their mailbox (every link and code queued for it is theirs); the stranger
knows the victim's address and holds nothing else. Whatever happens, a
password chosen by someone who never read the mailbox never becomes usable,
and a link or code works once, newest only.
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from authsvc.accounts import sign_in
from authsvc.accounts.code_tries import MAX_ATTEMPTS
from authsvc.accounts.tokens import TokenError
from authsvc.services import Services
from tests.address_life_support import confirmed, logs_in, user_id_of
from tests.api_support import SIGNUP_PASSWORD, ApiCaller, assert_problem, register_shop_app
from tests.link_support import latest_link
from tests.race_support import race, wait_until_waiting_on_a_lock
from tests.sign_in_support import (
    confirm,
    password_of,
    request_sign_in,
    sign_in_code,
    sign_in_jobs,
    sign_in_link,
    sign_up_by_email_app,
)

VICTIM = "victim@example.com"
STRANGER_PASSWORD = "stranger passphrase 1"
STRANGER_PASSWORD_2 = "stranger passphrase 2"
CHOSEN = "victim chose this 33"


def _stranger_signs_up(api: ApiCaller, password: str = STRANGER_PASSWORD) -> None:
    api.sign_up(VICTIM, password)


def _stranger_cannot_log_in(api: ApiCaller) -> None:
    for password in (STRANGER_PASSWORD, STRANGER_PASSWORD_2):
        assert not logs_in(api, VICTIM, password), password


# --- a password set before the address was proven never becomes usable --------------

INTERLEAVINGS = {
    # what the stranger does, and when: before the victim asks for a link,
    # between the request and the redemption, or after it
    "second signup before the request": (["signup"], [], []),
    "second signup between request and redemption": ([], ["signup"], []),
    "resend between request and redemption": ([], ["resend"], []),
    "reset request between request and redemption": ([], ["reset"], []),
    "signup, resend and reset in between": ([], ["signup", "resend", "reset"], []),
    "signup and reset after the redemption": ([], [], ["signup", "reset"]),
}


@pytest.mark.parametrize("steps", INTERLEAVINGS.values(), ids=INTERLEAVINGS.keys())
def test_a_strangers_pre_registered_password_never_works_whatever_the_order(
    api, conn, svc, steps
):
    before, between, after = steps
    _stranger_signs_up(api)

    def stranger(actions: list[str]) -> None:
        for action in actions:
            if action == "signup":
                _stranger_signs_up(api, STRANGER_PASSWORD_2)
            elif action == "resend":
                assert api.post("/verifications", {"email": VICTIM}).status_code == 202
            else:
                assert api.post("/password-resets", {"email": VICTIM}).status_code == 202
            _stranger_cannot_log_in(api)

    stranger(before)
    _stranger_cannot_log_in(api)
    request_sign_in(api, VICTIM)
    stranger(between)
    verify_link = latest_link(conn, svc, VICTIM, "verify")
    response = confirm(api, {"token": sign_in_link(conn, svc, VICTIM)})
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert body == {"user": {"id": user_id_of(conn, VICTIM), "email": VICTIM,
                             "email_verified": True}, "created": True}
    assert password_of(conn, VICTIM) == ""  # discarded
    _stranger_cannot_log_in(api)
    stranger(after)
    _stranger_cannot_log_in(api)
    assert password_of(conn, VICTIM) == ""
    # The verify links the stranger's signups sent died with the proof: none
    # of them can set a password now.
    assert_problem(api.post("/verifications/confirm",
                            {"token": verify_link, "password": STRANGER_PASSWORD}),
                   410, "token_superseded")


def test_a_signup_racing_the_redemption_loses_its_password_either_way(
    api, conn, svc, direct_database_url
):
    """The stranger's second signup commits while the redemption waits on the row lock.

    On the server's own URL, as the other lock races: through a transaction pooler a
    connection's backend is not the one pg_stat_activity would show waiting."""
    _stranger_signs_up(api)
    request_sign_in(api, VICTIM)
    token = sign_in_link(conn, svc, VICTIM)
    with psycopg.connect(direct_database_url) as stranger:
        # The signup's upsert holds the row until it commits.
        stranger.execute("UPDATE users SET password_hash = 'x', signup_count = signup_count + 1"
                         " WHERE email = %s", (VICTIM,))
        outcome: list[int] = []
        with psycopg.connect(direct_database_url, autocommit=True) as redeemer:
            pid = redeemer.info.backend_pid

            def redeem() -> None:
                signed_in = sign_in.sign_in_with_link(redeemer, svc, token=token)
                outcome.append(int(signed_in.password_discarded))

            thread = threading.Thread(target=redeem)
            thread.start()
            wait_until_waiting_on_a_lock(conn, pid, "the redemption waits on the signup")
            stranger.commit()
            thread.join(30)
    assert outcome == [1]
    assert password_of(conn, VICTIM) == ""


def test_a_person_who_signed_up_then_signs_in_by_email_keeps_a_password_they_choose(
    api, conn, svc
):
    api.sign_up(VICTIM, SIGNUP_PASSWORD)
    request_sign_in(api, VICTIM)
    token = sign_in_link(conn, svc, VICTIM)
    holder = sign_in.check_sign_in_link(conn, svc, token)
    assert sign_in.discards_password(holder)  # the page says so and offers a field
    signed_in = sign_in.sign_in_with_link(conn, svc, token=token, password=CHOSEN,
                                          user_agent="test browser")
    assert signed_in.created and signed_in.password_discarded
    assert signed_in.session_token is not None
    assert logs_in(api, VICTIM, CHOSEN)
    assert not logs_in(api, VICTIM, SIGNUP_PASSWORD)


def test_a_proven_accounts_password_is_kept_and_a_new_one_is_not_taken(api, conn, svc):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    signed_in = sign_in.sign_in_with_link(conn, svc, token=sign_in_link(conn, svc, VICTIM),
                                          password=CHOSEN)
    assert not signed_in.created and not signed_in.password_discarded
    assert logs_in(api, VICTIM, SIGNUP_PASSWORD)
    assert not logs_in(api, VICTIM, CHOSEN)


# --- an account with no password ------------------------------------------------------


def test_an_account_created_by_email_answers_like_a_wrong_password(client, conn, svc):
    club = sign_up_by_email_app(conn, client)
    request_sign_in(club, VICTIM)
    response = confirm(club, {"email": VICTIM, "code": sign_in_code(conn, svc, VICTIM)})
    assert response.status_code == 200 and response.get_json()["created"] is True
    assert password_of(conn, VICTIM) == ""
    confirmed(club, conn, svc, "other@example.com")
    # No password is stored as '' and checked against the dummy hash (the same
    # argon2 work as an unknown address): not even an empty password matches.
    for attempt in ("", "anything at all", SIGNUP_PASSWORD):
        mine = club.post("/sessions", {"email": VICTIM, "password": attempt})
        wrong = club.post("/sessions", {"email": "other@example.com", "password": attempt + "!"})
        assert (mine.status_code, mine.get_data()) == (wrong.status_code, wrong.get_data())
        assert_problem(mine, 401, "invalid_credentials")


# --- enumeration ------------------------------------------------------------------------


def test_every_kind_of_address_gets_the_same_202_bytes(api, client, conn, svc):
    confirmed(api, conn, svc, "known@example.com")
    api.sign_up("unconfirmed@example.com")
    api.sign_up("contested@example.com")
    api.sign_up("contested@example.com", "another passphrase 9")
    club = sign_up_by_email_app(conn, client)
    answers = set()
    for caller in (api, club):
        for email in ("known@example.com", "unknown@example.com", "unconfirmed@example.com",
                      "contested@example.com"):
            response = caller.post("/sign-in-links", {"email": email})
            answers.add((response.status_code, response.get_data(),
                         tuple(sorted((k, v) for k, v in response.headers.items()
                                      if k != "Date"))))
    assert len(answers) == 1, answers
    # Only the sign-up-by-email app's request for the unknown address made a link for it.
    assert sign_in_jobs(conn, "unknown@example.com") == 1
    assert sign_in_jobs(conn, "known@example.com") == 2


def test_an_unknown_address_without_sign_up_by_email_gets_nothing_and_no_account(api, conn):
    request_sign_in(api, "nobody@example.com")
    assert password_of(conn, "nobody@example.com") is None
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE recipient = %s",
                        ("nobody@example.com",)).fetchone() == (0,)


# --- replays and races --------------------------------------------------------------------


def test_a_used_link_and_a_used_code_answer_as_used(api, conn, svc):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    token, code = sign_in_link(conn, svc, VICTIM), sign_in_code(conn, svc, VICTIM)
    assert confirm(api, {"token": token}).status_code == 200
    assert_problem(confirm(api, {"token": token}), 410, "token_used")
    # A used code answers like any failing code (one answer for all, SPEC §4).
    assert_problem(confirm(api, {"email": VICTIM, "code": code}), 400, "invalid_code")


def test_two_concurrent_confirms_start_one_session(api, conn, svc, database_url):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    token = sign_in_link(conn, svc, VICTIM)

    def attempt(own: psycopg.Connection, _i: int) -> str:
        try:
            sign_in.sign_in_with_link(own, svc, token=token, user_agent="racer")
        except TokenError as exc:
            return exc.code
        return "signed_in"

    outcomes = race(database_url, 6, attempt)
    assert sorted(outcomes) == ["signed_in"] + ["token_used"] * 5
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (1,)


def test_two_concurrent_code_confirms_start_one_session(api, conn, svc, database_url):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    code = sign_in_code(conn, svc, VICTIM)

    def attempt(own: psycopg.Connection, _i: int) -> str:
        try:
            sign_in.sign_in_with_code(own, svc, email=VICTIM, code=code, user_agent="racer")
        except TokenError as exc:
            return exc.code
        return "signed_in"

    outcomes = race(database_url, 4, attempt)
    assert outcomes.count("signed_in") == 1, outcomes
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (1,)


def test_a_newer_request_retires_the_older_link_and_code(api, conn, svc):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    old_link, old_code = sign_in_link(conn, svc, VICTIM), sign_in_code(conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    assert_problem(confirm(api, {"token": old_link}), 410, "token_superseded")
    if old_code != sign_in_code(conn, svc, VICTIM):
        assert_problem(confirm(api, {"email": VICTIM, "code": old_code}), 400, "invalid_code")
    assert confirm(api, {"token": sign_in_link(conn, svc, VICTIM)}).status_code == 200


def test_five_wrong_codes_retire_the_code_not_the_link(api, conn, svc):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    code = sign_in_code(conn, svc, VICTIM)
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(MAX_ATTEMPTS):
        assert_problem(confirm(api, {"email": VICTIM, "code": wrong}), 400, "invalid_code")
    assert_problem(confirm(api, {"email": VICTIM, "code": code}), 410, "code_exhausted")
    assert confirm(api, {"token": sign_in_link(conn, svc, VICTIM)}).status_code == 200


def test_an_expired_link_and_code_do_not_sign_in(api, conn, svc, clock):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    token, code = sign_in_link(conn, svc, VICTIM), sign_in_code(conn, svc, VICTIM)
    clock.advance(svc.tokens.ttl("sign_in"))
    assert_problem(confirm(api, {"token": token}), 410, "token_expired")
    assert_problem(confirm(api, {"email": VICTIM, "code": code}), 410, "token_expired")


def test_a_link_of_another_purpose_is_no_sign_in_link(api, conn, svc):
    api.sign_up(VICTIM)
    assert_problem(confirm(api, {"token": latest_link(conn, svc, VICTIM, "verify")}),
                   400, "invalid_token")


# --- lockouts and what a proof clears ---------------------------------------------------------


def test_signing_in_by_email_works_despite_a_lockout_and_clears_it(app_with, conn, svc):
    limited = app_with(AUTHSVC_RATE_LIMIT_LOGIN="2/15m").test_client()
    api = ApiCaller(limited, *register_shop_app(conn))
    confirmed(api, conn, svc, VICTIM)
    for _ in range(3):
        api.post("/sessions", {"email": VICTIM, "password": "someone guessing"})
    assert_problem(api.post("/sessions", {"email": VICTIM, "password": SIGNUP_PASSWORD}),
                   429, "rate_limited")
    request_sign_in(api, VICTIM)
    assert confirm(api, {"token": sign_in_link(conn, svc, VICTIM)}).status_code == 200
    assert logs_in(api, VICTIM, SIGNUP_PASSWORD)


def test_a_contested_address_is_settled_by_signing_in(api, conn, svc):
    api.sign_up(VICTIM)
    api.sign_up(VICTIM, STRANGER_PASSWORD)
    request_sign_in(api, VICTIM)
    assert confirm(api, {"token": sign_in_link(conn, svc, VICTIM)}).status_code == 200
    row = conn.execute("SELECT signup_count, email_verified_at IS NOT NULL FROM users"
                       " WHERE email = %s", (VICTIM,)).fetchone()
    assert row == (1, True)


def test_a_placeholder_is_contested_by_a_signup_and_still_settled_by_its_link(
    client, conn, svc
):
    club = sign_up_by_email_app(conn, client)
    request_sign_in(club, VICTIM)
    club.sign_up(VICTIM, STRANGER_PASSWORD)  # a stranger, meanwhile
    # The stranger's verify link (to the victim's mailbox) needs a password now.
    assert_problem(club.post("/verifications/confirm",
                             {"token": latest_link(conn, svc, VICTIM, "verify")}),
                   422, "password_required")
    response = confirm(club, {"token": sign_in_link(conn, svc, VICTIM)})
    assert response.status_code == 200
    assert not logs_in(club, VICTIM, STRANGER_PASSWORD)
    assert password_of(conn, VICTIM) == ""


def test_a_placeholder_keeps_newest_only(client, conn, svc):
    club = sign_up_by_email_app(conn, client)
    request_sign_in(club, VICTIM)
    old = sign_in_link(conn, svc, VICTIM)
    request_sign_in(club, VICTIM)
    assert_problem(confirm(club, {"token": old}), 410, "token_superseded")
    assert conn.execute("SELECT count(*) FROM users WHERE email = %s",
                        (VICTIM,)).fetchone() == (1,)


def test_the_link_sign_in_checks_nothing_but_the_link(conn, svc: Services, api):
    """A session opened by the link is the account's, and nobody else's."""
    confirmed(api, conn, svc, VICTIM)
    confirmed(api, conn, svc, "other@example.com")
    request_sign_in(api, VICTIM)
    signed_in = sign_in.sign_in_with_link(conn, svc, token=sign_in_link(conn, svc, VICTIM),
                                          user_agent="test browser")
    assert signed_in.user.email == VICTIM
    row = conn.execute("SELECT u.email, s.started_by FROM web_sessions s"
                       " JOIN users u ON u.id = s.user_id").fetchall()
    assert row == [(VICTIM, "sign_in")]


# --- an account with no password changes its address or deletes itself ---------------------


def _no_password_account(client, conn, svc) -> ApiCaller:
    club = sign_up_by_email_app(conn, client)
    request_sign_in(club, VICTIM)
    assert confirm(club, {"token": sign_in_link(conn, svc, VICTIM)}).status_code == 200
    return club


def test_a_sign_in_code_stands_in_for_the_missing_password_once(client, conn, svc):
    club = _no_password_account(client, conn, svc)
    request_sign_in(club, VICTIM)
    code = sign_in_code(conn, svc, VICTIM)
    both = club.post("/email-changes", {"email": VICTIM, "password": "x" * 8,
                                        "sign_in_code": code, "new_email": "new@example.com"})
    assert_problem(both, 400, "invalid_request")
    answer = club.post("/email-changes", {"email": VICTIM, "sign_in_code": code,
                                          "new_email": "new@example.com"})
    assert answer.status_code == 202, answer.get_data(as_text=True)
    assert latest_link(conn, svc, "new@example.com", "email_change")
    # Used up: it opens nothing twice, and it signs nobody in.
    assert_problem(club.post("/account-deletions", {"email": VICTIM, "sign_in_code": code}),
                   401, "invalid_credentials")
    assert_problem(confirm(club, {"email": VICTIM, "code": code}), 400, "invalid_code")
    request_sign_in(club, VICTIM)
    answer = club.post("/account-deletions",
                       {"email": VICTIM, "sign_in_code": sign_in_code(conn, svc, VICTIM)})
    assert answer.status_code == 202
    assert latest_link(conn, svc, VICTIM, "account_delete")


def test_an_account_with_a_password_cannot_use_a_sign_in_code_instead(api, conn, svc):
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    code = sign_in_code(conn, svc, VICTIM)
    wrong_password = api.post("/account-deletions",
                              {"email": VICTIM, "password": "not the password"})
    by_code = api.post("/account-deletions", {"email": VICTIM, "sign_in_code": code})
    assert (by_code.status_code, by_code.get_data()) == (
        wrong_password.status_code, wrong_password.get_data())
    assert_problem(by_code, 401, "invalid_credentials")
    # The code was not used up: it still signs in.
    assert confirm(api, {"email": VICTIM, "code": code}).status_code == 200


def test_a_used_sign_in_token_is_not_replayed_under_its_idempotency_key(api, conn, svc):
    """Unlike the stored answers of other calls: a replayed 200 would sign in again."""
    confirmed(api, conn, svc, VICTIM)
    request_sign_in(api, VICTIM)
    token = sign_in_link(conn, svc, VICTIM)
    first = api.post("/sign-in-links/confirm", {"token": token}, idempotency_key="k-1")
    assert first.status_code == 200
    again = api.post("/sign-in-links/confirm", {"token": token}, idempotency_key="k-1")
    assert_problem(again, 410, "token_used")
    assert "Idempotent-Replayed" not in again.headers
