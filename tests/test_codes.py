"""SPEC §4 "Codes": the 6-digit code beside each link, redeemed with the address.

An attacker's view first: old codes, codes for the other purpose, guessing
(alone and in parallel threads), unknown addresses (same answer, same
work), and key rotation. The emailed code is what the worker renders.
"""

from __future__ import annotations

import re
import threading
from collections import Counter

import pytest

from authsvc.accounts import actions, users
from authsvc.accounts.code_tries import MAX_ATTEMPTS, MAX_WRONG_PER_HOUR
from authsvc.accounts.tokens import TokenError
from authsvc.apps.keys import register_app
from testkit.smtp_double import SmtpDouble
from testkit.waiting import wait_until
from tests.api_support import ApiCaller, assert_documented, assert_problem, register_shop_app
from tests.conftest import TEST_KEY
from tests.link_support import latest_claims, latest_code, latest_link
from tests.worker_support import running, worker

PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"
ANN = "ann@example.com"
VERIFY = "/verifications/confirm"
RESET = "/password-resets/confirm"
# What a caller sees of an answer: status, body, headers.
Shown = tuple[int, bytes, list[tuple[str, str]]]


def _signed_up(api: ApiCaller, email: str = ANN) -> None:
    assert api.post("/signups", {"email": email, "password": PASSWORD}).status_code == 202


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 10**6:06d}"


def test_verify_code_redeems_once(api, conn, svc):
    _signed_up(api)
    code = latest_code(conn, svc, ANN, "verify")
    first = api.post(VERIFY, {"email": ANN, "code": code})
    assert first.status_code == 200, first.get_json()
    assert first.get_json() == {"email": ANN, "verified": True}
    assert_documented(first, "POST", VERIFY)
    again = api.post(VERIFY, {"email": ANN, "code": code})
    assert_problem(again, 400, "invalid_code")
    assert_documented(again, "POST", VERIFY)
    login = api.post("/sessions", {"email": ANN, "password": PASSWORD})
    assert login.status_code == 200


def test_reset_code_redeems_once_and_sets_the_password(api, conn, svc):
    _signed_up(api)
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    code = latest_code(conn, svc, ANN, "reset")
    first = api.post(RESET, {"email": " Ann@Example.com ", "code": code, "password": NEW_PASSWORD})
    assert first.get_json() == {"status": "password_changed"}
    assert_documented(first, "POST", RESET)
    again = api.post(RESET, {"email": ANN, "code": code, "password": "yet another passphrase"})
    assert_problem(again, 400, "invalid_code")
    assert api.post("/sessions", {"email": ANN, "password": NEW_PASSWORD}).status_code == 200
    # The reset proved the address: the verify code from the signup is retired too.
    verify_code = latest_code(conn, svc, ANN, "verify")
    assert_problem(api.post(VERIFY, {"email": ANN, "code": verify_code}), 400, "invalid_code")


def test_code_typed_with_spaces_redeems(api, conn, svc):
    _signed_up(api)
    code = latest_code(conn, svc, ANN, "verify")
    response = api.post(VERIFY, {"email": ANN, "code": f" {code[:3]} {code[3:]} "})
    assert response.status_code == 200, response.get_json()


def test_older_emails_code_is_refused_after_a_newer_request(api, conn, svc):
    _signed_up(api)
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    older = latest_code(conn, svc, ANN, "reset")
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    newer = latest_code(conn, svc, ANN, "reset")
    assert older != newer
    body = {"email": ANN, "code": older, "password": NEW_PASSWORD}
    assert_problem(api.post(RESET, body), 400, "invalid_code")
    body["code"] = newer
    assert api.post(RESET, body).status_code == 200


def test_a_later_signup_retires_the_verify_code_and_needs_the_password(api, conn, svc):
    """§4a holds for codes: a contested address is confirmed only with a chosen password."""
    _signed_up(api)
    first = latest_code(conn, svc, ANN, "verify")
    attacker = {"email": ANN, "password": "attacker's passphrase"}
    assert api.post("/signups", attacker).status_code == 202
    assert_problem(api.post(VERIFY, {"email": ANN, "code": first}), 400, "invalid_code")
    code = latest_code(conn, svc, ANN, "verify")
    # Asking for the password does not use up the tries: a person may be told many times.
    for _ in range(MAX_ATTEMPTS + 1):
        needs = api.post(VERIFY, {"email": ANN, "code": code})
        assert_problem(needs, 422, "password_required")
        assert_documented(needs, "POST", VERIFY)
    done = api.post(VERIFY, {"email": ANN, "code": code, "password": NEW_PASSWORD})
    assert done.status_code == 200
    assert api.post("/sessions", {"email": ANN, "password": NEW_PASSWORD}).status_code == 200
    assert api.post("/sessions", attacker).status_code == 401


def test_a_code_for_the_other_purpose_is_refused(api, conn, svc):
    _signed_up(api)
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    verify_code = latest_code(conn, svc, ANN, "verify")
    reset_code = latest_code(conn, svc, ANN, "reset")
    # Same user and version 1 for both: only the purpose tells them apart.
    assert latest_claims(conn, ANN, "verify").version == latest_claims(conn, ANN, "reset").version
    assert verify_code != reset_code
    wrong = api.post(RESET, {"email": ANN, "code": verify_code, "password": NEW_PASSWORD})
    assert_problem(wrong, 400, "invalid_code")
    assert_problem(api.post(VERIFY, {"email": ANN, "code": reset_code}), 400, "invalid_code")
    assert api.post(VERIFY, {"email": ANN, "code": verify_code}).status_code == 200


def test_five_wrong_codes_retire_the_code_but_not_the_link(api, conn, svc):
    _signed_up(api)
    code = latest_code(conn, svc, ANN, "verify")
    for _ in range(MAX_ATTEMPTS):
        assert_problem(api.post(VERIFY, {"email": ANN, "code": _wrong(code)}), 400, "invalid_code")
    exhausted = api.post(VERIFY, {"email": ANN, "code": code})
    assert_problem(exhausted, 410, "code_exhausted")
    assert_documented(exhausted, "POST", VERIFY)
    link = api.post(VERIFY, {"token": latest_link(conn, svc, ANN, "verify")})
    assert link.status_code == 200, link.get_json()


def test_a_new_email_brings_a_new_code_with_fresh_tries(api, conn, svc):
    _signed_up(api)
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    code = latest_code(conn, svc, ANN, "reset")
    body = {"email": ANN, "code": _wrong(code), "password": NEW_PASSWORD}
    for _ in range(MAX_ATTEMPTS):
        api.post(RESET, body)
    assert_problem(api.post(RESET, {**body, "code": code}), 410, "code_exhausted")
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    fresh = latest_code(conn, svc, ANN, "reset")
    assert api.post(RESET, {**body, "code": fresh}).status_code == 200


def _spend_the_hour(api: ApiCaller, conn, svc, wrong: int = MAX_WRONG_PER_HOUR) -> None:
    """`wrong` wrong codes for ANN: four at a time, each four at a new email's code (so no code
    runs out of its own five), verify and reset in turn."""
    for n in range(wrong):
        purpose = ("verify", "reset")[n // 4 % 2]
        if n % 4 == 0:
            path = "/verifications" if purpose == "verify" else "/password-resets"
            assert api.post(path, {"email": ANN}).status_code == 202
        code = _wrong(latest_code(conn, svc, ANN, purpose))
        if purpose == "verify":
            assert_problem(api.post(VERIFY, {"email": ANN, "code": code}), 400, "invalid_code")
        else:
            body = {"email": ANN, "code": code, "password": NEW_PASSWORD}
            assert_problem(api.post(RESET, body), 400, "invalid_code")


def test_twenty_wrong_codes_an_hour_retire_every_code_of_the_address(api, conn, svc, clock):
    """Even the right code answers 410 for the rest of the hour, in both purposes."""
    clock.now = clock.now.replace(minute=50, second=0, microsecond=0)  # the hour ends in 10 min
    _signed_up(api)
    _spend_the_hour(api, conn, svc)
    verify_code = latest_code(conn, svc, ANN, "verify")
    reset_code = latest_code(conn, svc, ANN, "reset")
    exhausted = api.post(VERIFY, {"email": ANN, "code": verify_code})
    assert_problem(exhausted, 410, "code_exhausted")
    assert_documented(exhausted, "POST", VERIFY)
    body = {"email": ANN, "code": reset_code, "password": NEW_PASSWORD}
    assert_problem(api.post(RESET, body), 410, "code_exhausted")
    # A new email brings fresh tries for its code, not for the hour.
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    body["code"] = latest_code(conn, svc, ANN, "reset")
    assert_problem(api.post(RESET, body), 410, "code_exhausted")
    # The links keep working, and the next hour the codes do too.
    # (A resend made the address contested: confirming it chooses the password, §4a.)
    link = api.post(VERIFY, {"token": latest_link(conn, svc, ANN, "verify"),
                             "password": NEW_PASSWORD})
    assert link.status_code == 200, link.get_json()
    clock.advance(600)  # within the reset code's lifetime
    done = api.post(RESET, body)
    assert done.status_code == 200, done.get_json()


def test_right_codes_do_not_count_toward_the_hour(api, conn, svc):
    """Nineteen wrong codes, then right ones (one told to add a password), and the hour
    still has one try."""
    _signed_up(api)
    _spend_the_hour(api, conn, svc, MAX_WRONG_PER_HOUR - 1)
    verify = {"email": ANN, "code": latest_code(conn, svc, ANN, "verify")}
    assert_problem(api.post(VERIFY, verify), 422, "password_required")  # resends contest it
    assert api.post(VERIFY, {**verify, "password": NEW_PASSWORD}).status_code == 200
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    body = {"email": ANN, "code": latest_code(conn, svc, ANN, "reset"), "password": NEW_PASSWORD}
    assert api.post(RESET, body).status_code == 200
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    code = latest_code(conn, svc, ANN, "reset")
    body = {"email": ANN, "code": _wrong(code), "password": "yet another passphrase"}
    assert_problem(api.post(RESET, body), 400, "invalid_code")  # the twentieth wrong code
    assert_problem(api.post(RESET, {**body, "code": code}), 410, "code_exhausted")


def test_concurrent_wrong_guesses_never_exceed_five(conn, svc, pool):
    """Ten threads guess at once; the count is taken atomically, so exactly five are judged."""
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    code = latest_code(conn, svc, ANN, "verify")
    guesses = [f"{(int(code) + 1 + i) % 10**6:06d}" for i in range(10)]  # pool max 12
    start = threading.Barrier(len(guesses))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def guess(value: str) -> None:
        with pool.connection() as own:
            start.wait(timeout=10)
            try:
                actions.confirm_verification_code(own, svc, email=ANN, code=value)
                result = "redeemed"
            except TokenError as exc:
                result = exc.code
        with lock:
            outcomes[result] += 1

    threads = [threading.Thread(target=guess, args=(g,)) for g in guesses]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert outcomes == {"invalid_code": MAX_ATTEMPTS, "code_exhausted": 10 - MAX_ATTEMPTS}
    with pytest.raises(TokenError, match="code_exhausted"):
        actions.confirm_verification_code(conn, svc, email=ANN, code=code)


def test_concurrent_wrong_guesses_never_exceed_the_hour(conn, svc, pool):
    """Sixteen wrong codes, fresh emails, then ten threads in both purposes: four are judged."""
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    for purpose, request in (("verify", actions.request_verification),
                             ("reset", actions.request_password_reset)) * 2:
        assert request(conn, svc, email=ANN)
        for _ in range(4):
            with pytest.raises(TokenError, match="invalid_code"):
                _confirm(conn, svc, purpose, _wrong(latest_code(conn, svc, ANN, purpose)))
    for request in (actions.request_verification, actions.request_password_reset):
        assert request(conn, svc, email=ANN)  # each code has its five again; the hour has four
    guesses = [(purpose, _wrong(latest_code(conn, svc, ANN, purpose)))
               for purpose in ("verify", "reset") for _ in range(5)]
    start = threading.Barrier(len(guesses))
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def guess(purpose: str, value: str) -> None:
        with pool.connection() as own:
            start.wait(timeout=10)
            try:
                _confirm(own, svc, purpose, value)
                result = "redeemed"
            except TokenError as exc:
                result = exc.code
        with lock:
            outcomes[result] += 1

    threads = [threading.Thread(target=guess, args=g) for g in guesses]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    left = MAX_WRONG_PER_HOUR - 16
    assert outcomes == {"invalid_code": left, "code_exhausted": len(guesses) - left}


def _confirm(conn, svc, purpose: str, code: str) -> None:
    if purpose == "verify":
        actions.confirm_verification_code(conn, svc, email=ANN, code=code)
    else:
        actions.reset_password_with_code(conn, svc, email=ANN, code=code, password=NEW_PASSWORD)


def test_unknown_address_answers_byte_for_byte_like_a_wrong_code(api, conn, svc):
    """Also after five tries, and again after a new email: no step tells the two apart."""
    _signed_up(api)
    code = latest_code(conn, svc, ANN, "verify")
    nobody = "nobody@example.com"

    def both(known_code: str, unknown_code: str) -> tuple[Shown, Shown]:
        known = api.post(VERIFY, {"email": ANN, "code": known_code})
        unknown = api.post(VERIFY, {"email": nobody, "code": unknown_code})
        shown = [(r.status_code, r.get_data(), sorted(r.headers.items())) for r in (known, unknown)]
        return shown[0], shown[1]

    for _ in range(MAX_ATTEMPTS):
        known, unknown = both(_wrong(code), "000000")
        assert known == unknown and known[0] == 400
    known, unknown = both(code, "000000")
    assert known == unknown and known[0] == 410
    for email in (ANN, nobody):
        assert api.post("/verifications", {"email": email}).status_code == 202
    known, unknown = both("000000" if code != "000000" else "111111", "000000")
    assert known == unknown and known[0] == 400
    # A verified address has no code: it answers like an unknown one too.
    assert api.post(VERIFY, {"email": ANN, "code": latest_code(conn, svc, ANN, "verify"),
                             "password": NEW_PASSWORD}).status_code == 200
    known, unknown = both("123456", "123456")
    assert known == unknown and known[0] == 400


def test_malformed_codes_are_wrong_codes(api, conn, svc):
    _signed_up(api)
    fullwidth = "\uff11\uff12\uff13\uff14\uff15\uff16"  # digits, but not ASCII ones
    for value in ("", "12345", "1234567", "abcdef", fullwidth, "12345x", "-123456"):
        assert_problem(api.post(VERIFY, {"email": ANN, "code": value}), 400, "invalid_code")
        conn.execute("DELETE FROM code_attempts")
    too_long = api.post(VERIFY, {"email": ANN, "code": "1" * 33})
    assert_problem(too_long, 400, "invalid_request")


@pytest.mark.parametrize(
    "body, pointer",
    [
        ({}, "#/token"),
        ({"email": ANN}, "#/code"),
        ({"code": "123456"}, "#/email"),
        ({"token": "x", "email": ANN, "code": "123456"}, "#/email"),
        ({"token": "x", "code": "123456"}, "#/code"),
        ({"email": "not an address", "code": "123456"}, "#/email"),
        ({"email": ANN, "code": 123456}, "#/code"),
    ],
)
def test_confirm_bodies_take_a_token_or_an_email_and_code(api, body, pointer):
    for path in (VERIFY, RESET):
        sent = {**body, "password": NEW_PASSWORD} if path == RESET else body
        problem = assert_problem(api.post(path, sent), 400, "invalid_request")
        assert problem["errors"][0]["pointer"] == pointer


def test_right_code_after_the_lifetime_is_expired(api, conn, svc, clock):
    _signed_up(api)
    code = latest_code(conn, svc, ANN, "verify")
    clock.advance(svc.settings.verify_ttl)
    assert_problem(api.post(VERIFY, {"email": ANN, "code": code}), 410, "token_expired")
    assert_problem(api.post(VERIFY, {"email": ANN, "code": _wrong(code)}), 400, "invalid_code")


def test_weak_password_with_a_code_costs_no_try(api, conn, svc):
    _signed_up(api)
    assert api.post("/password-resets", {"email": ANN}).status_code == 202
    code = latest_code(conn, svc, ANN, "reset")
    for _ in range(MAX_ATTEMPTS + 1):
        weak = api.post(RESET, {"email": ANN, "code": code, "password": "password"})
        assert_problem(weak, 422, "weak_password")
    good = api.post(RESET, {"email": ANN, "code": code, "password": NEW_PASSWORD})
    assert good.status_code == 200


def test_codes_survive_key_rotation_like_links(app_with, client, conn, svc):
    """Minted under the old key: redeems after a rotation (new key first), not once retired."""
    app, key = register_shop_app(conn)
    old = ApiCaller(client, app, key)
    for email in (ANN, "bo@example.com"):
        _signed_up(old, email)
    rotated = app_with(AUTHSVC_SECRET_KEYS=f"{'n' * 40},{TEST_KEY}").test_client()
    retired = app_with(AUTHSVC_SECRET_KEYS="n" * 40).test_client()
    ann_code = latest_code(conn, svc, ANN, "verify")
    bo_code = latest_code(conn, svc, "bo@example.com", "verify")
    ok = ApiCaller(rotated, app, key).post(VERIFY, {"email": ANN, "code": ann_code})
    assert ok.status_code == 200, ok.get_json()
    bo = {"email": "bo@example.com", "code": bo_code}
    refused = ApiCaller(retired, app, key).post(VERIFY, bo)
    assert_problem(refused, 400, "invalid_code")
    # The same holds for the link, by the same keys.
    assert ApiCaller(retired, app, key).post(
        VERIFY, {"token": latest_link(conn, svc, "bo@example.com", "verify")}
    ).status_code == 400


def test_wrong_code_counts_even_under_an_idempotency_key(api, conn, svc):
    """The try is committed with the stored answer; a replay does not count again."""
    _signed_up(api)
    code = latest_code(conn, svc, ANN, "verify")
    for i in range(MAX_ATTEMPTS):
        wrong = api.post(VERIFY, {"email": ANN, "code": _wrong(code)}, idempotency_key=f"k{i}")
        assert_problem(wrong, 400, "invalid_code")
        replay = api.post(VERIFY, {"email": ANN, "code": _wrong(code)}, idempotency_key=f"k{i}")
        assert replay.headers.get("Idempotent-Replayed") == "true"
    assert_problem(api.post(VERIFY, {"email": ANN, "code": code}), 410, "code_exhausted")


def test_the_emails_carry_the_code_for_their_link(database_url, conn, svc, settings):
    with SmtpDouble() as smtp:
        actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
        actions.request_password_reset(conn, svc, email="nobody@example.com")
        shop, _key = register_app(conn, "shop", ["https://app.example/welcome"])
        actions.sign_up(conn, svc, email="bo@example.com", password=PASSWORD,
                         redirect_url="https://app.example/welcome", app=shop)
        worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    assert sorted(m.rcpt_tos[0] for m in smtp.messages) == [ANN, "bo@example.com"]
    ann = next(m for m in smtp.messages if m.rcpt_tos == [ANN])
    bo = next(m for m in smtp.messages if m.rcpt_tos == ["bo@example.com"])
    code = latest_code(conn, svc, ANN, "verify")
    body = ann.message.get_body(preferencelist=("html",))
    assert body is not None
    html = body.get_content()
    assert re.search(rf"^    {code}$", ann.text, re.MULTILINE), ann.text
    assert re.search(rf"<strong[^>]*>{code}</strong>", html), html
    assert f"{settings.base_url}/verify/code" in ann.text and "/verify/code" in html
    # An app's flow sends the person to the app's own page to type the code.
    assert "on this page: https://app.example/welcome" in " ".join(bo.text.split())
    user = actions.confirm_verification_code(conn, svc, email=ANN, code=code)
    stored = users.find_user_by_id(conn, user.id)
    assert stored is not None and stored.verified


def test_the_worker_prunes_counts_older_than_every_lifetime(database_url, conn, settings):
    longest = max(settings.reset_ttl, settings.verify_ttl)
    conn.execute(
        "INSERT INTO code_attempts (purpose, address_digest, attempts, created_at)"
        " VALUES ('verify', '\\x01', 5, now() - make_interval(secs => %s + 60)),"
        " ('reset', '\\x02', 5, now() - make_interval(secs => %s - 60))",
        (longest, longest),
    )

    def left() -> list[str]:
        return [r[0] for r in conn.execute("SELECT purpose FROM code_attempts")]

    with running(worker(database_url, settings, "smtp://127.0.0.1:9", poll_seconds=0.2)):
        wait_until(lambda: left() == ["reset"], what="the expired count to be pruned")
