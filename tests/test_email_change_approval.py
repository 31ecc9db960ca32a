"""AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD=on: a change needs the old address's approval too (SPEC §12).

A thief who knows the password asks to move the account to their own
address and confirms it from there: with approvals required, nothing moves
until the old mailbox approves. Every test here runs with the setting on
(the module's `settings` fixture).
"""

from __future__ import annotations

import psycopg
import pytest
from flask.testing import FlaskClient

from authsvc.config import Settings, load_settings
from authsvc.services import Services
from tests.address_life_support import (
    account_email,
    change_code,
    change_link,
    confirmed,
    queued_to,
    request_change,
    undo_link,
    user_id_of,
)
from tests.api_support import SIGNUP_PASSWORD, ApiCaller, assert_problem
from tests.link_support import latest_code, latest_link

OLD, NEW = "ann@example.com", "ann.new@example.com"


@pytest.fixture
def settings(env: dict[str, str]) -> Settings:
    return load_settings(env, AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD="on")


def approval_link(conn: psycopg.Connection, svc: Services, old_email: str) -> str:
    return latest_link(conn, svc, old_email, "email_change_approval")


@pytest.fixture
def asked(api: ApiCaller, conn: psycopg.Connection, svc: Services) -> int:
    """Ann's account, with a change to NEW asked for; its id."""
    confirmed(api, conn, svc, OLD)
    request_change(api, OLD, SIGNUP_PASSWORD, NEW)
    return user_id_of(conn, OLD)


def test_a_request_sends_a_link_and_code_to_each_address(asked, conn, svc):
    assert queued_to(conn, NEW) == [("email_change", "email_change")]
    assert queued_to(conn, OLD)[-1] == ("email_change_approval", "email_change_approval")
    # One version for both: a later request or a password change retires them together.
    change, approval = (latest_link(conn, svc, NEW, "email_change"), approval_link(conn, svc, OLD))
    read = svc.tokens.read
    assert read(change, "email_change").version == read(approval, "email_change_approval").version


def test_the_new_address_alone_moves_nothing(api, asked, conn, svc):
    token = change_link(conn, svc, NEW)
    response = api.post("/email-changes/confirm", {"token": token})
    assert (response.status_code, response.get_json()) == (202, {"status": "awaiting_old_address"})
    assert account_email(conn, asked) == OLD
    assert_problem(api.post("/email-changes/confirm", {"token": token}), 410, "token_used")
    assert account_email(conn, asked) == OLD


def test_the_old_address_alone_moves_nothing(api, asked, conn, svc):
    token = approval_link(conn, svc, OLD)
    response = api.post("/email-changes/approve", {"token": token})
    assert (response.status_code, response.get_json()) == (202, {"status": "awaiting_new_address"})
    assert account_email(conn, asked) == OLD
    assert_problem(api.post("/email-changes/approve", {"token": token}), 410, "token_used")


@pytest.mark.parametrize("first", ["new", "old"])
def test_both_addresses_in_either_order_move_the_account_once(api, asked, conn, svc, first):
    sides = {"new": ("/email-changes/confirm", change_link(conn, svc, NEW)),
             "old": ("/email-changes/approve", approval_link(conn, svc, OLD))}
    second = "old" if first == "new" else "new"
    assert api.post(sides[first][0], {"token": sides[first][1]}).status_code == 202
    response = api.post(sides[second][0], {"token": sides[second][1]})
    assert (response.status_code, response.get_json()) == (
        200, {"email": NEW, "previous_email": OLD})
    assert account_email(conn, asked) == NEW
    assert undo_link(conn, svc, OLD)  # the old address still gets its undo link
    for path, token in sides.values():
        assert_problem(api.post(path, {"token": token}), 410, "token_used")


def test_a_link_of_one_side_does_not_pass_for_the_other(api, asked, conn, svc):
    assert_problem(api.post("/email-changes/approve", {"token": change_link(conn, svc, NEW)}),
                   400, "invalid_token")
    assert_problem(api.post("/email-changes/confirm", {"token": approval_link(conn, svc, OLD)}),
                   400, "invalid_token")
    assert account_email(conn, asked) == OLD


def test_the_codes_work_typed_with_the_address_each_was_sent_to(api, asked, conn, svc):
    code = latest_code(conn, svc, OLD, "email_change_approval")
    # The approval's code typed as the new address's confirmation: nothing.
    assert_problem(api.post("/email-changes/confirm", {"email": OLD, "code": code}),
                   400, "invalid_code")
    assert api.post("/email-changes/approve", {"email": OLD, "code": code}).status_code == 202
    response = api.post("/email-changes/confirm", {"email": NEW, "code": change_code(conn, svc,
                                                                                      NEW)})
    assert response.status_code == 200 and account_email(conn, asked) == NEW


def test_a_newer_request_retires_both_links_of_the_older(api, asked, conn, svc):
    old_approval, old_change = approval_link(conn, svc, OLD), change_link(conn, svc, NEW)
    assert api.post("/email-changes/approve", {"token": old_approval}).status_code == 202
    request_change(api, OLD, SIGNUP_PASSWORD, "other@example.com")
    assert_problem(api.post("/email-changes/confirm", {"token": old_change}),
                   410, "token_superseded")
    # The first request's approval does not carry over to the second.
    response = api.post("/email-changes/confirm",
                        {"token": change_link(conn, svc, "other@example.com")})
    assert (response.status_code, response.get_json()) == (202, {"status": "awaiting_old_address"})
    assert account_email(conn, asked) == OLD


def test_a_password_reset_cancels_a_half_approved_change(api, asked, conn, svc):
    assert api.post("/email-changes/approve",
                    {"token": approval_link(conn, svc, OLD)}).status_code == 202
    assert api.post("/password-resets", {"email": OLD}).status_code == 202
    reset = latest_link(conn, svc, OLD, "reset")
    assert api.post("/password-resets/confirm",
                    {"token": reset, "password": "a fresh passphrase 42"}).status_code == 200
    assert_problem(api.post("/email-changes/confirm", {"token": change_link(conn, svc, NEW)}),
                   410, "token_superseded")
    assert account_email(conn, asked) == OLD


def test_a_taken_new_address_sends_the_old_address_nothing(api, conn, svc):
    confirmed(api, conn, svc, OLD)
    confirmed(api, conn, svc, NEW)
    before = queued_to(conn, OLD)
    request_change(api, OLD, SIGNUP_PASSWORD, NEW)
    assert queued_to(conn, OLD) == before
    assert queued_to(conn, NEW)[-1] == ("email_in_use", None)


def test_the_approval_page_shows_a_button_and_only_its_post_approves(
    client: FlaskClient, asked, conn, svc
):
    token = approval_link(conn, svc, OLD)
    for _ in range(3):  # a mail scanner opening the link, again and again
        page = client.get(f"/email-change/approve?token={token}")
        assert page.status_code == 200
        text = page.get_data(as_text=True)
        assert "Approve the change" in text and "a\u2022\u2022\u2022@example.com" in text
        assert NEW not in text  # the old mailbox sees the new address masked, as in the email
    assert client.head(f"/email-change/approve?token={token}").status_code == 200
    assert not conn.execute("SELECT 1 FROM token_redemptions"
                            " WHERE purpose = 'email_change_approval'").fetchall()
    csrf = text.split('name="csrf_token" type="hidden" value="')[1].split('"')[0]
    done = client.post("/email-change/approve", data={"token": token, "csrf_token": csrf})
    assert done.status_code == 200
    assert "needs confirming from the new address" in done.get_data(as_text=True)
    again = client.get(f"/email-change/approve?token={token}")
    assert again.status_code == 410 and "already approved" in again.get_data(as_text=True)
    assert account_email(conn, asked) == OLD


def _approval_email(smtp, database_url: str, settings: Settings, svc: Services) -> tuple[str, str]:
    """The text of the newest approval email sent to OLD, and its link's token."""
    from tests.worker_support import worker
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    [message] = [m for m in smtp.messages if m.rcpt_tos == [OLD]
                 and "email-change/approve" in m.text][-1:]
    token = next(w for w in message.text.split() if "token=" in w).split("token=")[1]
    return message.text, token


def test_an_apps_own_accounts_approval_email_carries_its_brand_and_no_other_apps(
        api, conn, svc, smtp, database_url, settings):
    from authsvc.apps.keys import register_app
    assert api.call("PATCH", "/app", {"product_name": "Shop Brand"}).status_code == 200
    confirmed(api, conn, svc, OLD)
    request_change(api, OLD, SIGNUP_PASSWORD, NEW)
    text, token = _approval_email(smtp, database_url, settings, svc)
    assert "Shop Brand" in text
    assert svc.tokens.read(token, "email_change_approval").brand_app_id == api.app.id
    # Another app asks for the same account: authsvc's own brand, naming that app.
    other_app, other_key = register_app(conn, "Other Corp", ["https://other.example/w"])
    other = ApiCaller(api.client, other_app, other_key)
    assert other.call("PATCH", "/app", {"product_name": "Other Brand"}).status_code == 200
    request_change(other, OLD, SIGNUP_PASSWORD, "ann.third@example.com")
    text, token = _approval_email(smtp, database_url, settings, svc)
    assert "Shop Brand" not in text and "Other Brand" not in text and "Other Corp" in text
    assert svc.tokens.read(token, "email_change_approval").brand_app_id is None
