"""The operator console's door (SPEC §15), attacked.

The attackers: someone with no session probing every console URL; a signed-in
user (even one who is an operator) hoping their web session opens /admin; a
page on another site submitting the console's forms; a guesser at
/admin/login from one IP, and someone filling the user login limit to lock
an operator out; someone replaying a used code or an old cookie.
"""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import psycopg
import pytest

from authsvc.accounts import actions
from authsvc.accounts.sessions import token_hash
from authsvc.operators import CONSOLE_CODE_TTL, access, roles
from testkit.waiting import wait_until
from tests.accounts_support import one_number, stored_user
from tests.address_life_support import changed
from tests.api_support import ApiCaller, register_shop_app
from tests.console_support import (
    OPERATOR,
    advance,
    code_step,
    console_sign_in,
    csrf_of,
    emailed_code,
    make_operator,
    password_step,
    post,
    signed_in_console,
)
from tests.link_support import latest_link
from tests.pages_support import PASSWORD, make_account, sign_in
from tests.race_support import sessions_waiting_on_locks

GET_PAGES = ["/admin/", "/admin/jobs", "/admin/jobs/1", "/admin/accounts",
             "/admin/accounts?address=ann%40example.com", "/admin/accounts/1",
             "/admin/suppressions", "/admin/apps", "/admin/log"]
POST_ACTIONS = ["/admin/jobs/1/redrive", "/admin/jobs/1/cancel",
                "/admin/accounts/1/end-sessions", "/admin/accounts/1/send-reset",
                "/admin/accounts/1/lift-lockout", "/admin/accounts/1/void-undo-links",
                "/admin/accounts/1/delete", "/admin/suppressions/lift",
                "/admin/apps/00000000-0000-0000-0000-000000000000/revoke", "/admin/logout"]


def _is_sign_in_redirect(answer) -> bool:  # type: ignore[no-untyped-def]
    return answer.status_code == 303 and answer.headers["Location"] == "/admin/login"


@pytest.mark.parametrize("path", GET_PAGES)
def test_every_console_page_without_a_console_session_sends_to_sign_in(client, conn, svc, path):
    make_account(conn, svc)  # an address the page could name
    answer = client.get(path)
    assert _is_sign_in_redirect(answer)
    body = answer.get_data(as_text=True)
    assert "@" not in body and "pending" not in body.lower()


@pytest.mark.parametrize("path", POST_ACTIONS)
def test_every_action_without_a_console_session_sends_to_sign_in_and_changes_nothing(
        app, conn, svc, path):
    make_account(conn, svc)
    browser = app.test_client()
    token = csrf_of(browser, "/admin/login")  # a valid CSRF token: only the session is missing
    answer = browser.post(path, data={"csrf_token": token, "address": "ann@example.com"})
    assert _is_sign_in_redirect(answer)
    assert one_number(conn, "SELECT count(*) FROM users") == 1
    assert one_number(conn, "SELECT count(*) FROM operator_log") == 0


def test_a_user_session_is_not_a_console_session(app, conn, svc):
    make_operator(conn, svc)  # even an operator's own user session opens nothing here
    browser = app.test_client()
    sign_in(browser, OPERATOR)
    assert browser.get("/account").status_code == 200
    assert _is_sign_in_redirect(browser.get("/admin/"))
    # And the user session's cookie, sent as the console's, is no console session.
    cookie = browser.get_cookie("session")
    assert cookie is not None
    browser.set_cookie("authsvc_console", cookie.value, path="/admin")
    assert _is_sign_in_redirect(browser.get("/admin/"))


def test_an_operator_removed_mid_session_loses_access_on_the_next_request(app, conn, svc):
    operator = make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    assert console.get("/admin/").status_code == 200
    assert roles.remove_operator(conn, operator.id)
    assert _is_sign_in_redirect(console.get("/admin/"))
    assert one_number(conn, "SELECT count(*) FROM console_sessions") == 0


def test_the_password_step_answers_alike_right_or_wrong_operator_or_not(app, conn, svc):
    """Nothing tells a right password from a wrong one, or an operator from anyone else:
    everyone goes on to the same code page, and only the operator's right password
    queues a code. So guessing here from many IPs learns nothing."""
    make_operator(conn, svc)
    make_account(conn, svc, "ann@example.com")
    pages = []
    for email, password in ((OPERATOR, PASSWORD), ("ann@example.com", PASSWORD),
                            (OPERATOR, "wrong password!"), ("nobody@example.com", PASSWORD),
                            ("not an address", PASSWORD)):
        browser = app.test_client()
        answer = password_step(browser, email, password)
        assert answer.status_code == 303, answer.get_data(as_text=True)
        assert answer.headers["Location"] == "/admin/login/code"
        page = browser.get("/admin/login/code").get_data(as_text=True)
        pages.append(re.sub(r'value="[^"]*"', "", page))
    assert len(set(pages)) == 1
    assert OPERATOR not in pages[0]
    assert one_number(conn, "SELECT count(*) FROM email_jobs WHERE template = 'console_code'") == 1


def test_a_wrong_password_gets_the_wrong_code_answer_whatever_code_is_typed(app, conn, svc):
    make_operator(conn, svc)
    guesser = app.test_client()
    password_step(guesser, password="wrong password!")
    answer = code_step(guesser, "123456")
    assert answer.status_code == 422
    assert _is_sign_in_redirect(guesser.get("/admin/"))


def test_console_failures_count_against_the_addresss_login_limit(app_with, conn, svc):
    """The per-address limit /login applies also sees guesses made here (it is not enforced
    here: that would let anyone lock an operator out of the console)."""
    make_operator(conn, svc)
    app = app_with(AUTHSVC_RATE_LIMIT_LOGIN="3/15m")
    for n in range(3):
        password_step(app.test_client(), password="guess guess guess", ip=f"10.0.1.{n}")
    assert post(app.test_client(), "/login", {"email": OPERATOR, "password": PASSWORD},
                ip="10.0.2.1").status_code == 429


def test_the_code_goes_through_the_outbox_and_is_not_stored(app, conn, svc):
    make_operator(conn, svc)
    answer = password_step(app.test_client())
    assert answer.status_code == 303
    row = conn.execute("SELECT purpose, payload::text, recipient FROM email_jobs"
                       " WHERE template = 'console_code'").fetchone()
    assert row is not None and row[0] == "console_login" and row[2] == OPERATOR
    assert emailed_code(conn, svc) not in row[1]


def test_a_code_used_twice_fails(app, conn, svc):
    make_operator(conn, svc)
    first = app.test_client()
    assert password_step(first).status_code == 303
    sign_in_cookie = first.get_cookie("authsvc_console_sign_in", path="/admin")
    assert sign_in_cookie is not None
    code = emailed_code(conn, svc)
    assert code_step(first, code).headers["Location"] == "/admin/"
    # A copy of the sign-in cookie with the same code, after it was used: nothing opens.
    replay = app.test_client()
    replay.set_cookie("authsvc_console_sign_in", sign_in_cookie.value, path="/admin")
    again = replay.post("/admin/login/code",
                        data={"csrf_token": csrf_of(replay, "/admin/login"), "code": code})
    assert again.status_code == 422
    assert _is_sign_in_redirect(replay.get("/admin/"))
    assert one_number(conn, "SELECT count(*) FROM console_sessions") == 1


def test_a_newer_password_step_retires_the_earlier_code(app, conn, svc, clock):
    make_operator(conn, svc)
    browser = app.test_client()
    password_step(browser)
    old_code = emailed_code(conn, svc)
    advance(clock, 1)  # a later issued_at: a different code
    password_step(browser)
    new_code = emailed_code(conn, svc)
    assert new_code != old_code
    assert code_step(browser, old_code).status_code == 422
    assert code_step(browser, new_code).headers["Location"] == "/admin/"


def test_wrong_codes_end_the_sign_in_after_five(app, conn, svc):
    make_operator(conn, svc)
    browser = app.test_client()
    password_step(browser)
    right = emailed_code(conn, svc)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    for _ in range(5):
        assert code_step(browser, wrong).status_code == 422
    # The right code no longer opens anything: the sign-in has no tries left (its row
    # stays, deleting it would be a commit only a right password's sign-in makes).
    assert one_number(conn, "SELECT wrong_codes FROM console_sign_ins") == 5
    assert code_step(browser, right).status_code == 422
    assert _is_sign_in_redirect(browser.get("/admin/"))
    # The next password step starts a new sign-in in its place.
    password_step(browser)
    assert one_number(conn, "SELECT count(*) FROM console_sign_ins WHERE wrong_codes = 0") == 1
    assert one_number(conn, "SELECT count(*) FROM console_sign_ins") == 1


def test_an_expired_code_fails(app, conn, svc, clock):
    make_operator(conn, svc)
    browser = app.test_client()
    password_step(browser)
    advance(clock, 11)
    assert code_step(browser, emailed_code(conn, svc)).status_code == 422
    assert _is_sign_in_redirect(browser.get("/admin/"))


@pytest.mark.parametrize(("after_end", "opens"), [(-1, True), (0, False)])
def test_a_code_opens_until_its_lifetime_ends_to_the_microsecond(conn, svc, clock, after_end,
                                                                 opens):
    make_operator(conn, svc)
    token = access.check_password(conn, svc, email=OPERATOR, password=PASSWORD, ip="10.9.4.1")
    row = conn.execute("SELECT issued_at FROM console_sign_ins").fetchone()
    assert row is not None
    clock.now = row[0] + timedelta(seconds=CONSOLE_CODE_TTL, microseconds=after_end)

    def sign_in() -> str:
        return access.check_code(conn, svc, sign_in_token=token, code=emailed_code(conn, svc),
                                 ip="10.9.4.1", user_agent="clock")
    if opens:
        assert sign_in()
    else:
        with pytest.raises(access.WrongCode):
            sign_in()


def test_failed_sign_ins_lock_out_that_ip_only(app_with, conn, svc):
    make_operator(conn, svc)
    app = app_with(AUTHSVC_RATE_LIMIT_LOGIN="3/15m")
    guesser = app.test_client()
    for _ in range(3):
        assert password_step(guesser, password="guess guess guess", ip="10.0.0.9") \
            .status_code == 303
    limited = password_step(guesser, password=PASSWORD, ip="10.0.0.9")
    assert limited.status_code == 429 and "Retry-After" in limited.headers
    # The operator, elsewhere, signs in as usual.
    console_sign_in(app.test_client(), conn, svc, ip="10.0.0.1")


def test_the_user_login_limit_does_not_lock_an_operator_out(app_with, conn, svc):
    make_operator(conn, svc)
    app = app_with(AUTHSVC_RATE_LIMIT_LOGIN="3/15m")
    attacker = app.test_client()
    for _ in range(5):
        attacker.post("/login", data={"csrf_token": csrf_of(attacker, "/login"),
                                      "email": OPERATOR, "password": "guess guess guess"},
                      environ_base={"REMOTE_ADDR": "10.0.0.9"})
    assert post(attacker, "/login", {"email": OPERATOR, "password": PASSWORD},
                ip="10.0.0.9").status_code == 429
    console_sign_in(app.test_client(), conn, svc, ip="10.0.0.1")


def test_the_session_ends_after_thirty_idle_minutes(app, conn, svc, clock):
    make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    advance(clock, 29)
    assert console.get("/admin/").status_code == 200
    advance(clock, 29)  # each request restarts the idle time
    assert console.get("/admin/").status_code == 200
    advance(clock, 31)
    assert _is_sign_in_redirect(console.get("/admin/"))


def test_the_session_ends_after_eight_hours_however_busy(app, conn, svc, clock):
    make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    for _ in range(16):
        advance(clock, 29)
        assert console.get("/admin/").status_code == 200
    advance(clock, 16)  # 480 minutes since sign-in
    assert _is_sign_in_redirect(console.get("/admin/"))


def test_sign_out_ends_the_session_for_every_copy_of_the_cookie(app, conn, svc):
    make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    cookie = console.get_cookie("authsvc_console", path="/admin")
    assert cookie is not None
    assert _is_sign_in_redirect(post(console, "/admin/logout", form_page="/admin/"))
    thief = app.test_client()
    thief.set_cookie("authsvc_console", cookie.value, path="/admin")
    assert _is_sign_in_redirect(thief.get("/admin/"))


def test_an_action_without_its_csrf_token_is_refused(app, conn, svc):
    make_operator(conn, svc)
    ann = stored_user(conn, make_account(conn, svc, "ann@example.com"))
    console = signed_in_console(app, conn, svc)
    answer = console.post(f"/admin/accounts/{ann.id}/delete")
    assert answer.status_code == 400
    assert one_number(conn, "SELECT count(*) FROM users WHERE id = %s", (ann.id,)) == 1
    assert one_number(conn, "SELECT count(*) FROM operator_log"
                            " WHERE action = 'account.delete'") == 0


@pytest.mark.parametrize("headers", [{"Origin": "https://evil.example"},
                                     {"Sec-Fetch-Site": "cross-site"},
                                     {"Sec-Fetch-Site": "same-site", "Origin": "null"}])
def test_an_action_from_another_origin_is_refused_even_with_a_token(app, conn, svc, headers):
    make_operator(conn, svc)
    ann = stored_user(conn, make_account(conn, svc, "ann@example.com"))
    console = signed_in_console(app, conn, svc)
    token = csrf_of(console, f"/admin/accounts/{ann.id}")
    answer = console.post(f"/admin/accounts/{ann.id}/delete", data={"csrf_token": token},
                          headers=headers)
    assert answer.status_code == 403
    assert one_number(conn, "SELECT count(*) FROM users WHERE id = %s", (ann.id,)) == 1


@pytest.mark.parametrize("path", ["/admin/login", "/admin/", "/admin/jobs", "/admin/log"])
def test_console_pages_forbid_caching_framing_and_scripts(app, conn, svc, path):
    make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    answer = console.get(path)
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    assert answer.headers["X-Frame-Options"] == "DENY"
    csp = answer.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "script-src" not in csp and "unsafe-inline" not in csp
    assert "<script" not in answer.get_data(as_text=True).lower()


def test_actions_are_post_only(app, conn, svc):
    make_operator(conn, svc)
    ann = stored_user(conn, make_account(conn, svc, "ann@example.com"))
    console = signed_in_console(app, conn, svc)
    assert console.get(f"/admin/accounts/{ann.id}/delete").status_code == 405
    assert one_number(conn, "SELECT count(*) FROM users WHERE id = %s", (ann.id,)) == 1


def test_a_right_password_uses_up_the_ip_budget_like_a_wrong_one(app_with, conn, svc):
    """Were a right password's try given back, the 429 would tell which guess was right."""
    make_operator(conn, svc)
    app = app_with(AUTHSVC_RATE_LIMIT_LOGIN="3/15m")
    guesser = app.test_client()
    for password in (PASSWORD, "guess guess guess", "guess guess again"):
        assert password_step(guesser, password=password, ip="10.0.0.9").status_code == 303
    assert password_step(guesser, password="one more guess", ip="10.0.0.9").status_code == 429


def test_a_password_reset_ends_the_operators_console_sessions(app, conn, svc):
    """A thief's console session does not outlive the owner's reset (every session ends)."""
    make_operator(conn, svc)
    thief = signed_in_console(app, conn, svc)
    assert thief.get("/admin/").status_code == 200
    actions.request_password_reset(conn, svc, email=OPERATOR)
    actions.reset_password(conn, svc, token=latest_link(conn, svc, OPERATOR, "reset"),
                           password="the owner's new passphrase")
    assert _is_sign_in_redirect(thief.get("/admin/"))
    assert one_number(conn, "SELECT count(*) FROM console_sessions") == 0


def test_an_operator_who_moves_the_account_to_another_address_loses_the_role(
    app, client, conn, svc
):
    """With only the password, a thief moves the operator's account to their own mailbox:
    the console's code would go there, so the role does not follow."""
    make_operator(conn, svc)
    console = signed_in_console(app, conn, svc)
    shop, key = register_shop_app(conn)
    changed(ApiCaller(client, shop, key), conn, svc, OPERATOR, PASSWORD, "thief@example.com")
    assert roles.list_operators(conn) == []
    assert _is_sign_in_redirect(console.get("/admin/"))
    assert one_number(conn, "SELECT count(*) FROM operator_log"
                            " WHERE action = 'operator.role_dropped'") == 1
    # The thief's sign-in at /admin with the password finds no operator: no code is sent.
    assert password_step(app.test_client(), email="thief@example.com").status_code == 303
    assert one_number(conn, "SELECT count(*) FROM email_jobs WHERE template = 'console_code'"
                            " AND recipient = 'thief@example.com'") == 0


def _wrong_codes_at_once(conn, svc, database_url: str, count: int) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """`count` wrong codes for one sign-in, each from its own IP, all held at the
    sign-in's row and then released together. Returns (sign-in token, right code).

    Which of them PostgreSQL lets through first is not fixed (waiters on an
    updated row race for its newest version), so what is checked afterwards
    depends only on how many there were, never on their order.
    """
    make_operator(conn, svc)
    token = access.check_password(conn, svc, email=OPERATOR, password=PASSWORD, ip="10.9.0.1")
    right = emailed_code(conn, svc)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"
    outcomes: list[str] = []

    def guess(ip: str) -> None:
        with psycopg.connect(database_url, autocommit=True) as own:
            try:
                access.check_code(own, svc, sign_in_token=token, code=wrong, ip=ip,
                                  user_agent="race")
                outcomes.append("signed in")
            except access.WrongCode:
                outcomes.append("wrong")

    with psycopg.connect(database_url, autocommit=True) as blocker:
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM console_sign_ins WHERE token_hash = %s FOR UPDATE",
                        (token_hash(token),))
        guesses = [threading.Thread(target=guess, args=(f"10.9.1.{i}",)) for i in range(count)]
        for thread in guesses:
            thread.start()
        wait_until(lambda: sessions_waiting_on_locks(conn) == count,
                   what=f"{count} guesses held at the sign-in")
        blocker.execute("ROLLBACK")
    for thread in guesses:
        thread.join(30)
    assert outcomes == ["wrong"] * count
    return token, right


def test_five_wrong_codes_at_once_end_the_sign_in(conn, svc, direct_database_url):
    """Concurrent guesses cannot share a try: five at once use up all five, and
    the right code after them opens nothing."""

    token, right = _wrong_codes_at_once(conn, svc, direct_database_url, 5)
    with pytest.raises(access.WrongCode):
        access.check_code(conn, svc, sign_in_token=token, code=right, ip="10.9.2.1",
                          user_agent="race")
    assert one_number(conn, "SELECT count(*) FROM console_sessions") == 0


@pytest.mark.parametrize("password_right", [True, False])
def test_a_second_code_for_one_sign_in_waits_for_the_first_whatever_the_password(
        conn, svc, direct_database_url, password_right):
    """Codes sent together for one sign-in queue behind one another after a wrong password
    just as after a right one (where each waits for the try before it to commit): were
    only a right password's codes to queue, sending a few at once would time which
    password was right."""

    make_operator(conn, svc)
    password = PASSWORD if password_right else "not the password"
    token = access.check_password(conn, svc, email=OPERATOR, password=password, ip="10.9.0.1")
    finished = threading.Event()

    def second_code() -> None:
        with psycopg.connect(direct_database_url, autocommit=True) as own:
            with pytest.raises(access.WrongCode):
                access.check_code(own, svc, sign_in_token=token, code="000000",
                                  ip="10.9.3.2", user_agent="race")
        finished.set()

    with psycopg.connect(direct_database_url, autocommit=True) as first:
        # The first code's transaction held open, as a commit waiting for its disk would.
        first.execute("BEGIN")
        with pytest.raises(access.WrongCode):
            access.check_code(first, svc, sign_in_token=token, code="000001", ip="10.9.3.1",
                              user_agent="race")
        second = threading.Thread(target=second_code)
        second.start()
        wait_until(lambda: finished.is_set() or sessions_waiting_on_locks(conn) == 1,
                   what="the second code to finish or to wait")
        assert not finished.is_set(), "the second code did not wait for the first"
        first.execute("COMMIT")
    second.join(30)
    assert finished.is_set()


def test_ten_wrong_codes_at_once_have_only_five_checked(conn, svc, direct_database_url,
                                                       monkeypatch):
    """However many guesses arrive together, only five are ever compared with the code
    (each takes its try before it is checked, so none can share one)."""
    checked: list[str] = []
    compare = type(svc.tokens).code_matches

    def counted(tokens, claims, code):  # type: ignore[no-untyped-def]
        checked.append(code)
        return compare(tokens, claims, code)

    monkeypatch.setattr(type(svc.tokens), "code_matches", counted)
    _wrong_codes_at_once(conn, svc, direct_database_url, 10)
    assert len(checked) == 5


def test_four_wrong_codes_at_once_leave_the_fifth_try(conn, svc, direct_database_url):
    """The cap is exact under concurrency too: after four wrong codes at once,
    the right code is the fifth try and signs in."""

    token, right = _wrong_codes_at_once(conn, svc, direct_database_url, 4)
    access.check_code(conn, svc, sign_in_token=token, code=right, ip="10.9.2.1",
                      user_agent="race")
    assert one_number(conn, "SELECT count(*) FROM console_sessions") == 1


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", "/admin/no-such-page", 404),
    ("GET", "/admin/accounts/1/delete", 405),
    ("PUT", "/admin/login", 405),
    ("DELETE", "/admin/", 405),
])
def test_console_errors_are_not_cached_either(app, conn, svc, method, path, status):
    """A wrong path or method under /admin answers no-store too, signed in or not."""
    make_operator(conn, svc)
    for browser in (app.test_client(), signed_in_console(app, conn, svc)):
        answer = browser.open(path, method=method)
        assert answer.status_code == status
        assert answer.headers.get("Cache-Control") == "no-store", (method, path)
