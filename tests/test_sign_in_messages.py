"""SPEC §13's emails, events, settings and app option, as their receivers see them.

The emails go through a real worker to an SMTP server in the test; the
events are the outbox rows the worker delivers (tests/test_events_webhooks.py
covers their signing and delivery).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import psycopg
from click.testing import CliRunner

from authsvc.apps import keys
from authsvc.cli import main as cli_main
from authsvc.inbox.link_states import link_state
from tests.address_life_support import confirmed, user_id_of
from tests.api_support import ALLOWED_REDIRECT, ApiCaller, register_shop_app
from tests.sign_in_support import confirm, request_sign_in, sign_in_link, sign_up_by_email_app
from tests.webhook_support import register_webhook_app, serving
from tests.worker_support import deliver_once_to

_CODE = re.compile(r"^\s*(\d{6})\s*$", re.MULTILINE)


def test_the_sign_in_email_has_its_link_its_code_and_its_expiry(
    api, conn, svc, database_url, settings, smtp
):
    confirmed(api, conn, svc, "ann@example.com")
    request_sign_in(api, "ann@example.com")
    message = deliver_once_to(database_url, settings, svc.clock, smtp, "ann@example.com")
    assert message.subject == "Your sign-in link"
    link = message.link
    assert urlsplit(link).path == "/sign-in"
    [code] = _CODE.findall(message.text)
    assert code in message.html and link.replace("&", "&amp;") in message.html
    assert "valid for 15 minutes" in message.text and "expires at" in message.text
    assert "/sign-in/code" in message.text
    # The emailed link and code are the ones that redeem.
    token = parse_qs(urlsplit(link).query)["token"][0]
    assert confirm(api, {"token": token}).status_code == 200


def test_an_apps_redirect_applies_to_its_own_accounts_only(client, conn, svc):
    club = sign_up_by_email_app(conn, client)
    request_sign_in(club, "new@example.com", redirect_url=ALLOWED_REDIRECT)
    payload = conn.execute("SELECT payload FROM email_jobs WHERE recipient = %s",
                           ("new@example.com",)).fetchone()[0]
    assert payload["redirect_url"] == ALLOWED_REDIRECT and payload["own_account"] is True
    # Another app's account: authsvc's own page, whatever the app asked for.
    other = ApiCaller(client, *register_shop_app(conn, "other"))
    request_sign_in(other, "new@example.com", redirect_url=ALLOWED_REDIRECT)
    payload = conn.execute("SELECT payload FROM email_jobs WHERE recipient = %s"
                           " ORDER BY id DESC LIMIT 1", ("new@example.com",)).fetchone()[0]
    assert "redirect_url" not in payload


def test_a_sign_in_that_proves_an_address_tells_the_app_user_verified(
    client, conn, svc, settings
):
    with serving() as receiver:
        app, key, _secret = register_webhook_app(conn, settings, receiver.url)
        keys.set_sign_up_by_email(conn, app.id, True)
        api = ApiCaller(client, app, key)
        request_sign_in(api, "new@example.com")
        assert confirm(api, {"token": sign_in_link(conn, svc, "new@example.com")}).status_code \
            == 200
        events = _events(conn)
        assert events == [("user.verified", app.id)]
        # A second sign-in proves nothing new: no event.
        request_sign_in(api, "new@example.com")
        assert confirm(api, {"token": sign_in_link(conn, svc, "new@example.com")}).status_code \
            == 200
        assert _events(conn) == events
        # The account is the app's own: its later links follow its redirect.
        row = conn.execute("SELECT count(*) FROM account_apps WHERE user_id = %s AND app_id = %s",
                           (user_id_of(conn, "new@example.com"), app.id)).fetchone()
        assert row == (1,)


def _events(conn: psycopg.Connection) -> list[tuple[str, object]]:
    return conn.execute("SELECT template, app_id FROM email_jobs WHERE kind = 'webhook'"
                        " ORDER BY id").fetchall()


def test_unknown_addresses_get_a_note_only_when_the_setting_is_on(
    app_with, conn, svc, database_url, settings, smtp
):
    quiet = ApiCaller(app_with().test_client(), *register_shop_app(conn))
    for path in ("/password-resets", "/sign-in-links"):
        assert quiet.post(path, {"email": "nobody@example.com"}).status_code == 202
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (0,)

    noisy_client = app_with(AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES="on",
                            AUTHSVC_RATE_LIMIT_EMAIL="1/15m").test_client()
    noisy = ApiCaller(noisy_client, *register_shop_app(conn, "noisy"))
    answers = set()
    for path in ("/password-resets", "/sign-in-links", "/verifications"):
        for _ in range(2):  # the second of each is over the budget: nothing more
            response = noisy.post(path, {"email": "none@example.com"})
            answers.add((response.status_code, response.get_data()))
    assert len(answers) == 1
    rows = conn.execute("SELECT template, payload->>'asked_for' FROM email_jobs"
                        " ORDER BY id").fetchall()
    assert rows == [("no_account", "reset"), ("no_account", "sign_in")]
    message = deliver_once_to(database_url, settings, svc.clock, smtp, "none@example.com")
    assert message.subject == "No account uses this address"
    assert "token=" not in message.text and not _CODE.findall(message.text)
    # A known address gets its link, never the note.
    confirmed(noisy, conn, svc, "known@example.com")
    request_sign_in(noisy, "known@example.com")
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE recipient = %s"
                        " AND template = 'no_account'", ("known@example.com",)).fetchone() == (0,)


def test_apps_create_and_update_set_sign_up_by_email(env, conn):
    runner = CliRunner()
    created = runner.invoke(cli_main, ["apps", "create", "club", "--redirect-url",
                                       ALLOWED_REDIRECT, "--sign-up-by-email"], env=env)
    assert created.exit_code == 0, created.output
    app_id = created.output.split("app id:")[1].split()[0]
    listing = runner.invoke(cli_main, ["apps", "list"], env=env)
    assert "sign-up by email: on" in listing.output
    updated = runner.invoke(cli_main, ["apps", "update", app_id, "--no-sign-up-by-email"],
                            env=env)
    assert updated.exit_code == 0, updated.output
    assert conn.execute("SELECT sign_up_by_email FROM apps WHERE id = %s",
                        (app_id,)).fetchone() == (False,)
    runner.invoke(cli_main, ["apps", "update", app_id, "--sign-up-by-email"], env=env)
    assert conn.execute("SELECT sign_up_by_email FROM apps WHERE id = %s",
                        (app_id,)).fetchone() == (True,)


def test_the_test_inbox_knows_the_state_of_a_sign_in_link(api, conn, svc, settings):
    confirmed(api, conn, svc, "ann@example.com")
    request_sign_in(api, "ann@example.com")
    old = f"{settings.base_url}/sign-in?token={sign_in_link(conn, svc, 'ann@example.com')}"
    request_sign_in(api, "ann@example.com")
    token = sign_in_link(conn, svc, "ann@example.com")
    new = f"{settings.base_url}/sign-in?token={token}"
    assert link_state(conn, svc, new).as_json() == {
        "url": new, "purpose": "sign_in", "state": "would_redeem"}
    assert link_state(conn, svc, new).state == "would_redeem"  # reading used nothing up
    assert link_state(conn, svc, old).state == "superseded"
    assert confirm(api, {"token": token}).status_code == 200
    assert link_state(conn, svc, new).state == "used"
