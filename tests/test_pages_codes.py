"""/verify/code and /reset/code: the emailed code typed into a page (CSRF, IP limit, §4a)."""

from __future__ import annotations

from authsvc.accounts import actions, users
from authsvc.accounts.code_tries import MAX_ATTEMPTS
from tests.link_support import latest_code, latest_link
from tests.pages_support import PASSWORD, csrf_token, submit, text_of

ANN = "ann@example.com"
NEW = "a brand new passphrase"


def _wrong(code: str) -> str:
    return f"{(int(code) + 1) % 10**6:06d}"


def _account(conn, svc) -> tuple[bool, list[str]]:
    """Ann's account as it is stored: (address proven?, which of the two passwords works)."""
    user = users.find_user_by_email(conn, ANN)
    assert user is not None
    works = [p for p in (PASSWORD, NEW) if svc.passwords.verify(user.password_hash, p)]
    return user.verified, works


def _sessions(conn) -> int:
    return int(conn.execute("SELECT count(*) FROM web_sessions").fetchone()[0])


def test_verify_code_page_confirms_once(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    code = latest_code(conn, svc, ANN, "verify")
    page = client.get("/verify/code")
    assert page.status_code == 200 and 'autocomplete="one-time-code"' in page.get_data(as_text=True)
    assert _account(conn, svc) == (False, [PASSWORD])
    done = submit(client, "/verify/code", {"email": ANN, "code": code})
    assert done.status_code == 200 and "is confirmed" in text_of(done)
    assert _account(conn, svc) == (True, [PASSWORD])
    again = submit(client, "/verify/code", {"email": ANN, "code": code})
    assert again.status_code == 422 and "does not work for this address" in text_of(again)
    assert _account(conn, svc) == (True, [PASSWORD])


def test_wrong_code_and_unknown_address_pages_are_the_same(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    code = latest_code(conn, svc, ANN, "verify")
    token = csrf_token(client, "/verify/code")

    def page(email: str, value: str) -> tuple[int, str]:
        response = client.post("/verify/code", data={"csrf_token": token, "email": email,
                                                      "code": value})
        return response.status_code, text_of(response).replace(email, "EMAIL")

    assert page(ANN, _wrong(code)) == page("nobody@example.com", _wrong(code))
    assert _account(conn, svc) == (False, [PASSWORD])


def test_contested_address_page_asks_for_the_password(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    actions.sign_up(conn, svc, email=ANN, password="attacker's passphrase")
    code = latest_code(conn, svc, ANN, "verify")
    asked = submit(client, "/verify/code", {"email": ANN, "code": code})
    assert asked.status_code == 422 and "Choose your password" in text_of(asked)
    assert _account(conn, svc) == (False, [])  # the attacker's password, not yet confirmed
    done = submit(client, "/verify/code", {"email": ANN, "code": code, "password": NEW})
    assert done.status_code == 200
    assert _account(conn, svc) == (True, [NEW])


def test_exhausted_code_page_points_to_the_link(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    code = latest_code(conn, svc, ANN, "verify")
    for _ in range(MAX_ATTEMPTS):
        submit(client, "/verify/code", {"email": ANN, "code": _wrong(code)})
    gone = submit(client, "/verify/code", {"email": ANN, "code": code})
    assert gone.status_code == 410 and "link in the same email still works" in text_of(gone)
    assert _account(conn, svc) == (False, [PASSWORD])
    token = latest_link(conn, svc, ANN, "verify")
    assert client.get(f"/verify?token={token}").status_code == 200
    confirmed = submit(client, "/verify", {"token": token}, form_page=f"/verify?token={token}")
    assert confirmed.status_code == 200
    assert _account(conn, svc) == (True, [PASSWORD])


def test_reset_code_page_sets_the_password_and_logs_nobody_in(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    actions.request_password_reset(conn, svc, email=ANN)
    code = latest_code(conn, svc, ANN, "reset")
    weak = submit(client, "/reset/code", {"email": ANN, "code": code, "password": "password"})
    assert weak.status_code == 422 and "too common" in text_of(weak)
    assert _account(conn, svc) == (False, [PASSWORD])
    done = submit(client, "/reset/code", {"email": ANN, "code": code, "password": NEW})
    assert done.status_code == 303 and done.headers["Location"].endswith("/login")
    assert _account(conn, svc) == (True, [NEW])  # a completed reset proves the address
    assert _sessions(conn) == 0


def test_code_pages_need_csrf(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    code = latest_code(conn, svc, ANN, "verify")
    forged = client.post("/verify/code", data={"email": ANN, "code": code})
    assert forged.status_code == 400 and "This form has expired" in text_of(forged)
    reset = client.post("/reset/code", data={"email": ANN, "code": code, "password": NEW})
    assert reset.status_code == 400
    assert conn.execute("SELECT count(*) FROM code_attempts").fetchone() == (0,)
    assert _account(conn, svc) == (False, [PASSWORD])


def test_code_pages_share_the_per_ip_form_limit(app_with, conn, svc):
    client = app_with(AUTHSVC_RATE_LIMIT_IP="3/15m").test_client()
    token = csrf_token(client, "/verify/code")
    statuses = [
        client.post(path, data={"csrf_token": token, "email": ANN, "code": "123456",
                                "password": NEW}).status_code
        for path in ("/verify/code", "/reset/code", "/verify/code", "/reset/code")
    ]
    assert statuses == [422, 422, 422, 429]


def test_bad_input_is_a_form_error(client, conn, svc):
    actions.sign_up(conn, svc, email=ANN, password=PASSWORD)
    for data in ({"email": "not an address", "code": "123456"}, {"email": ANN, "code": ""},
                 {"email": ANN, "code": "1" * 33}):
        response = submit(client, "/verify/code", data)
        assert response.status_code == 422
    # Refused before any code was tried: no try spent, nothing confirmed.
    assert conn.execute("SELECT count(*) FROM code_attempts").fetchone() == (0,)
    assert _account(conn, svc) == (False, [PASSWORD])


def test_check_email_page_links_to_the_code_form(client):
    for sent, target in (("signup", "/verify/code"), ("reset", "/reset/code"),
                         ("verify", "/verify/code")):
        page = client.get(f"/check-email?sent={sent}")
        assert f'href="{target}"' in page.get_data(as_text=True)
