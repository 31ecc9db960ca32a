"""Server-side web sessions (SPEC §4a): logout and "end session" are final.

The attacker here copied a browser's session cookie (a shared computer, a
stolen backup, malware) and replays it after the owner logged out.
"""

from __future__ import annotations

import re

import argon2
import pytest
from flask.testing import FlaskClient

from authsvc.accounts import actions
from tests.link_support import latest_link
from tests.pages_support import PASSWORD, make_account, submit, text_of


def _logged_in(app) -> FlaskClient:
    browser = app.test_client()
    answer = submit(browser, "/login", {"email": "ann@example.com", "password": PASSWORD})
    assert answer.status_code == 303
    assert browser.get("/account").status_code == 200
    return browser


def _copy_cookie(source: FlaskClient, app) -> FlaskClient:
    cookie = source.get_cookie("session")
    assert cookie is not None
    thief = app.test_client()
    thief.set_cookie("session", cookie.value)
    return thief


def test_a_cookie_copied_before_logout_opens_nothing_after_it(app, conn, svc):
    make_account(conn, svc)
    owner = _logged_in(app)
    thief = _copy_cookie(owner, app)
    assert thief.get("/account").status_code == 200  # the copy works while the session lives
    submit(owner, "/logout", {}, form_page="/logout")
    # Before the fix: 200, the signed cookie still named the user.
    replayed = thief.get("/account")
    assert replayed.status_code == 303 and replayed.headers["Location"] == "/login"
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (0,)


def test_the_account_page_lists_sessions_and_ends_another_one(app, conn, svc):
    make_account(conn, svc)
    laptop = _logged_in(app)
    [laptop_id] = [row[0] for row in conn.execute("SELECT id FROM web_sessions")]
    phone = _logged_in(app)
    page = text_of(laptop.get("/account"))
    assert page.count("Started") == 1 and "(this browser)" in page
    ids = [row[0] for row in conn.execute("SELECT id FROM web_sessions")]
    # Session ids are random (unordered_id()): the phone's is the one that is not the laptop's.
    [phone_id] = set(ids) - {laptop_id}
    html = laptop.get("/account").get_data(as_text=True)
    assert all(f'name="session_id" value="{i}"' in html for i in ids)
    found = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', html)
    assert found is not None, "no CSRF token on /account"
    token = found.group(1)
    ended = laptop.post("/account/sessions/end", data={"csrf_token": token,
                                                      "session_id": str(phone_id)})
    assert ended.status_code == 303
    assert phone.get("/account").headers["Location"] == "/login"
    assert laptop.get("/account").status_code == 200


def test_ending_a_session_of_another_user_does_nothing(app, conn, svc):
    make_account(conn, svc)
    make_account(conn, svc, "bob@example.com")
    ann = _logged_in(app)
    bob = app.test_client()
    submit(bob, "/login", {"email": "bob@example.com", "password": PASSWORD})
    bobs = conn.execute(
        "SELECT s.id FROM web_sessions s JOIN users u ON u.id = s.user_id"
        " WHERE u.email = 'bob@example.com'"
    ).fetchone()[0]
    answer = submit(ann, "/account/sessions/end", {"session_id": str(bobs)}, form_page="/account")
    assert answer.status_code == 303
    assert bob.get("/account").status_code == 200


def test_end_every_session_logs_out_everywhere(app, conn, svc):
    make_account(conn, svc)
    laptop, phone = _logged_in(app), _logged_in(app)
    submit(laptop, "/account/sessions/end", {"session_id": "all"}, form_page="/account")
    assert laptop.get("/account").status_code == 303
    assert phone.get("/account").headers["Location"] == "/login"


def test_ending_sessions_needs_the_forms_csrf_token(app, conn, svc):
    make_account(conn, svc)
    laptop, phone = _logged_in(app), _logged_in(app)
    forged = laptop.post("/account/sessions/end", data={"session_id": "all"})
    assert forged.status_code == 400
    assert phone.get("/account").status_code == 200


def test_wrong_current_passwords_count_against_the_login_limit(app, conn, svc):
    """Before the fix the change-password form was an unlimited guessing oracle."""
    make_account(conn, svc)
    browser = _logged_in(app)
    limit = svc.settings.rate_limit_login.limit
    statuses = [
        submit(browser, "/account/password", {"current": f"guess number {i}",
                                              "new": "a brand new passphrase"},
               form_page="/account").status_code
        for i in range(limit + 1)
    ]
    assert statuses[:limit] == [422] * limit and statuses[limit] == 429
    # The same budget as /login: the address is now locked there too.
    other = app.test_client()
    assert submit(other, "/login", {"email": "ann@example.com",
                                    "password": PASSWORD}).status_code == 429


def test_the_cookie_holds_no_account_id_and_the_table_no_token(app, conn, svc):
    make_account(conn, svc)
    browser = _logged_in(app)
    session = browser.get_cookie("session")
    assert session is not None
    cookie = session.value
    contents = app.session_interface.get_signing_serializer(app).loads(cookie)
    assert set(contents) <= {"session_token", "csrf_token", "_permanent"}  # no user id
    stored = conn.execute("SELECT token_hash FROM web_sessions").fetchone()[0]
    assert contents["session_token"].encode() not in bytes(stored)


def test_bad_session_ids_end_nothing_and_never_fail(app, conn, svc):
    make_account(conn, svc)
    laptop, phone = _logged_in(app), _logged_in(app)
    for bad in ("abc", "-1", "99999999999999999999", "", "1 OR 1=1", "x" * 50, "\u00b2", "\u0663"):
        answer = submit(laptop, "/account/sessions/end", {"session_id": bad}, form_page="/account")
        assert answer.status_code in (303, 422), (bad, answer.status_code)
    assert phone.get("/account").status_code == 200
    assert laptop.get("/account").status_code == 200


def test_a_login_that_overlaps_a_reset_gets_no_session(conn, svc):
    """The thief logs in with the old password while the owner resets it.

    authenticate() checks the hash it read; by the time the session row is
    written, the owner's reset has committed and ended every session. The new
    session must not outlive the reset (before the fix it did: the thief's
    cookie opened /account afterwards). The interleaving is played in order,
    standing in for the thief's argon2 run overlapping the reset.
    """
    email = make_account(conn, svc)
    thief_view = actions.authenticate(conn, svc, email=email, password=PASSWORD)
    actions.request_password_reset(conn, svc, email=email)
    actions.reset_password(
        conn, svc, token=latest_link(conn, svc, email, "reset"), password="a brand new secret 42"
    )
    with pytest.raises(actions.InvalidCredentials):
        actions.start_session(conn, svc, user=thief_view, user_agent="thief")
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (0,)


def test_a_login_whose_hash_was_upgraded_still_gets_its_session(conn, svc):
    """The guard compares with the hash as it is after a login's own rehash."""
    email = make_account(conn, svc)
    # Parameters other than the service's, so authenticate() rehashes.
    weak = argon2.PasswordHasher(time_cost=3, memory_cost=16, parallelism=1).hash(PASSWORD)
    conn.execute("UPDATE users SET password_hash = %s", (weak,))
    user = actions.authenticate(conn, svc, email=email, password=PASSWORD)
    stored = conn.execute("SELECT password_hash FROM users").fetchone()[0]
    assert stored != weak  # authenticate upgraded the hash
    actions.start_session(conn, svc, user=user, user_agent="owner")
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (1,)
