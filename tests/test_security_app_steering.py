"""App-steered links: an app's redirect_url applies only to accounts that belong to it.

The attack: an app registered with its own redirect URL asks a reset for an
account another app (or the web pages) created. Were its redirect honoured,
the account holder would get a genuine email whose link and "type the code
at" page are on the attacker's site, and one click would hand the account
over. An account belongs to the app it signed up through and to every app
through which it completed a flow (SPEC §14 "Whose account"); for any other
account the email uses authsvc's own pages and names the app that asked.
A flow is through an app only when the email redeemed was queued while the
account was already the app's: an app cannot become a member by getting its
own (redirect-less) email redeemed, whether it superseded the real app's
email to get there or the holder simply followed it.
"""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

from authsvc.accounts import actions
from authsvc.apps.keys import register_app
from authsvc.config import Settings
from authsvc.services import Services
from testkit.smtp_double import Received, SmtpDouble
from tests.api_support import ALLOWED_REDIRECT, SIGNUP_PASSWORD, ApiCaller
from tests.race_support import wait_until_waiting_on_a_lock
from tests.worker_support import worker

EVIL_REDIRECT = "https://evil.example/steal"
ANN = "ann@example.com"


@pytest.fixture
def evil(api: ApiCaller, conn: psycopg.Connection) -> ApiCaller:
    """A second app, with an allowlisted redirect of its own."""
    app, key = register_app(conn, "Evil Corp", [EVIL_REDIRECT])
    return ApiCaller(api.client, app, key)


class Mailbox:
    """Runs the worker once per look and returns what it sent since the last look."""

    def __init__(self, database_url: str, settings: Settings, svc: Services,
                 smtp: SmtpDouble) -> None:
        self.database_url, self.settings, self.svc, self.smtp = database_url, settings, svc, smtp
        self.seen = 0

    def new(self) -> list[Received]:
        worker(self.database_url, self.settings, self.smtp.url, self.svc.clock, once=True).run()
        fresh = self.smtp.messages[self.seen:]
        self.seen = len(self.smtp.messages)
        return fresh

    def one(self) -> Received:
        [message] = self.new()
        return message


@pytest.fixture
def mailbox(database_url: str, settings: Settings, svc: Services, smtp: SmtpDouble) -> Mailbox:
    return Mailbox(database_url, settings, svc, smtp)


def _token(message: Received) -> str:
    return parse_qs(urlsplit(message.link).query)["token"][0]


def _assert_own_pages(message: Received, settings: Settings, purpose: str,
                      app_name: str) -> None:
    """The link and the code page are authsvc's, nothing points at the app, the app is named."""
    paths = {"verify": ("/verify", "/verify/code"), "reset": ("/reset/confirm", "/reset/code")}
    link_path, code_path = paths[purpose]
    assert message.link.startswith(f"{settings.base_url}{link_path}?token=")
    assert f"on this page: {settings.base_url}{code_path}" in " ".join(message.text.split())
    html = message.html
    for part in (message.text, html):
        assert "evil.example" not in part
        assert "allowed.example.com" not in part
    assert f"Requested through the app “{app_name}”." in " ".join(message.text.split())
    assert f"Requested through the app “{app_name}”." in html


def _assert_app_pages(message: Received, redirect: str, app_name: str) -> None:
    assert message.link.startswith(redirect + "?token=")
    assert f"on this page: {redirect}" in " ".join(message.text.split())
    assert f"Requested through the app “{app_name}”." in " ".join(message.text.split())


def _apps_of(conn: psycopg.Connection, email: str) -> set[str]:
    """The names of the apps the account belongs to (account_apps)."""
    return {row[0] for row in conn.execute(
        "SELECT a.name FROM account_apps AS m JOIN apps AS a ON a.id = m.app_id"
        " JOIN users AS u ON u.id = m.user_id WHERE u.email = %s", (email,))}


def test_another_apps_reset_for_an_account_an_app_created_uses_authsvcs_pages(
    api, evil, mailbox, settings
):
    api.sign_up(ANN)
    mailbox.new()
    response = evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    assert response.status_code == 202  # the same answer: nothing tells the app it was ignored
    _assert_own_pages(mailbox.one(), settings, "reset", "Evil Corp")


def test_another_apps_reset_for_an_account_made_on_the_pages_uses_authsvcs_pages(
    conn, svc, evil, mailbox, settings
):
    actions.sign_up(conn, svc, email=ANN, password=SIGNUP_PASSWORD)  # what /signup does
    mailbox.new()
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "reset", "Evil Corp")


def test_another_apps_resend_and_signup_for_an_unconfirmed_account_use_authsvcs_pages(
    api, evil, mailbox, settings
):
    api.sign_up(ANN)
    mailbox.new()
    evil.post("/verifications", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "verify", "Evil Corp")
    evil.post("/signups", {"email": ANN, "password": "evil long passphrase",
                           "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "verify", "Evil Corp")


def test_an_account_an_app_created_gets_that_apps_redirect(api, evil, mailbox):
    signup = {"email": ANN, "password": SIGNUP_PASSWORD, "redirect_url": EVIL_REDIRECT}
    assert evil.post("/signups", signup).status_code == 202
    _assert_app_pages(mailbox.one(), EVIL_REDIRECT, "Evil Corp")
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_app_pages(mailbox.one(), EVIL_REDIRECT, "Evil Corp")
    # Still nobody else's: the first app's redirect does not apply to it.
    api.post("/password-resets", {"email": ANN, "redirect_url": ALLOWED_REDIRECT})
    assert "allowed.example.com" not in mailbox.one().text


def test_completing_another_apps_reset_does_not_make_the_account_that_apps(
    api, evil, conn, svc, mailbox, settings
):
    """The holder follows a reset another app asked for (on authsvc's page, naming the app):
    that app's redirect did not apply, so the flow is not through it and it gains nothing."""
    api.sign_up(ANN)
    actions.confirm_verification(conn, svc, token=_token(mailbox.one()))
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    reset = mailbox.one()
    _assert_own_pages(reset, settings, "reset", "Evil Corp")
    actions.reset_password(conn, svc, token=_token(reset), password="a new long passphrase")
    notice = mailbox.one()
    # The "password changed" notice names the app whose reset was used, as the reset did.
    assert "Requested through the app “Evil Corp”." in " ".join(notice.text.split())
    assert "Requested through the app “Evil Corp”." in notice.html
    assert _apps_of(conn, ANN) == {"shop"}
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "reset", "Evil Corp")
    # The app the account is still gets its redirect.
    api.post("/password-resets", {"email": ANN, "redirect_url": ALLOWED_REDIRECT})
    _assert_app_pages(mailbox.one(), ALLOWED_REDIRECT, "shop")


@pytest.mark.parametrize("superseding", ["resend", "reset", "signup"])
def test_superseding_the_apps_email_does_not_steer_the_account_to_the_superseder(
    api, evil, conn, svc, mailbox, settings, superseding
):
    """The shop signs ann up; another app's call sends her a newer email (a resend or a
    signup retires the shop's link, and the page for the shop's link then says "use the
    newest email"; a reset proves the address as well). Ann uses it and chooses a
    password. Its redirect was dropped, so the flow is through no app: the other app
    must not get the account (nor its next reset onto its site)."""
    api.post("/signups", {"email": ANN, "password": SIGNUP_PASSWORD,
                          "redirect_url": ALLOWED_REDIRECT})
    _assert_app_pages(mailbox.one(), ALLOWED_REDIRECT, "shop")
    new_password = "ann chose this passphrase"
    if superseding == "reset":
        evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
        newest = mailbox.one()
        _assert_own_pages(newest, settings, "reset", "Evil Corp")
        actions.reset_password(conn, svc, token=_token(newest), password=new_password)
        mailbox.new()  # the "password changed" notice
    else:
        if superseding == "resend":
            evil.post("/verifications", {"email": ANN, "redirect_url": EVIL_REDIRECT})
        else:
            evil.post("/signups", {"email": ANN, "password": "evil long passphrase",
                                   "redirect_url": EVIL_REDIRECT})
        newest = mailbox.one()
        _assert_own_pages(newest, settings, "verify", "Evil Corp")
        actions.confirm_verification(conn, svc, token=_token(newest), password=new_password)
    assert "Evil Corp" not in _apps_of(conn, ANN)
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "reset", "Evil Corp")
    # Nor did the shop's email prove it: who chose the password is not known to be the
    # shop's user, so the account is nobody's (the safe side).
    assert _apps_of(conn, ANN) == set()


def test_the_apps_own_resend_keeps_the_account_the_apps(api, conn, svc, mailbox):
    """A resend makes the address contested, but the app's own resend, asked while the
    account was its (one signup), still carries its redirect and keeps it the app's."""
    api.post("/signups", {"email": ANN, "password": SIGNUP_PASSWORD,
                          "redirect_url": ALLOWED_REDIRECT})
    mailbox.new()
    api.post("/verifications", {"email": ANN, "redirect_url": ALLOWED_REDIRECT})
    resend = mailbox.one()
    _assert_app_pages(resend, ALLOWED_REDIRECT, "shop")
    actions.confirm_verification(conn, svc, token=_token(resend), password="ann passphrase 3")
    assert _apps_of(conn, ANN) == {"shop"}
    api.post("/password-resets", {"email": ANN, "redirect_url": ALLOWED_REDIRECT})
    _assert_app_pages(mailbox.one(), ALLOWED_REDIRECT, "shop")


def test_the_first_signer_gets_no_redirect_once_the_address_is_contested(
    api, evil, conn, svc, mailbox, settings
):
    """Evil signs ann up first; ann signs up through the shop. Evil's reset must not go
    to its site, and redeeming it must not keep the account Evil's."""
    evil.post("/signups", {"email": ANN, "password": "evil long passphrase",
                           "redirect_url": EVIL_REDIRECT})
    mailbox.new()
    api.post("/signups", {"email": ANN, "password": SIGNUP_PASSWORD,
                          "redirect_url": ALLOWED_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "verify", "shop")
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    reset = mailbox.one()
    _assert_own_pages(reset, settings, "reset", "Evil Corp")
    evil.post("/verifications", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "verify", "Evil Corp")
    actions.reset_password(conn, svc, token=_token(reset), password="whoever holds it 4")
    mailbox.new()
    assert _apps_of(conn, ANN) == set()
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "reset", "Evil Corp")


def test_a_reset_racing_the_first_proof_reads_the_address_as_the_redemption_locks_it(
    api, evil, conn, svc, mailbox, direct_database_url
):
    """The shop's verify link proves ann's address while a reset another app asked for is
    being redeemed. The reset must see the address as proven (the row it locks), not as its
    earlier read had it, so it is no first proof and the shop keeps the account."""
    api.sign_up(ANN)
    verify = _token(mailbox.one())
    evil.post("/password-resets", {"email": ANN})
    reset = _token(mailbox.one())
    failures: list[BaseException] = []

    def redeem_reset(own: psycopg.Connection) -> None:
        try:
            actions.reset_password(own, svc, token=reset, password="a racing passphrase 5")
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    with psycopg.connect(direct_database_url, autocommit=True) as verifier, \
            psycopg.connect(direct_database_url, autocommit=True) as resetter:
        resetter_pid = resetter.info.backend_pid
        with verifier.transaction():
            actions.confirm_verification(verifier, svc, token=verify)
            # The reset reads ann as unproven, then waits for the verify's row lock.
            racing = threading.Thread(target=redeem_reset, args=(resetter,))
            racing.start()
            wait_until_waiting_on_a_lock(conn, resetter_pid, "the reset to wait for the verify")
        racing.join(10)
        assert not racing.is_alive()
    assert failures == []
    assert _apps_of(conn, ANN) == {"shop"}


def test_an_app_that_signed_up_an_address_first_loses_it_when_another_flow_proves_it(
    api, evil, conn, svc, mailbox, settings
):
    """The pre-account trick: create the victim's account through your app before they do.

    The second signup makes the address contested, so it is nobody's until proven; the
    shop's email then uses authsvc's pages, and proving the address through it makes the
    account nobody's: neither app's redirect applies to it afterwards."""
    evil.post("/signups", {"email": ANN, "password": "evil long passphrase",
                           "redirect_url": EVIL_REDIRECT})
    mailbox.new()  # the holder ignores it
    api.post("/signups", {"email": ANN, "password": SIGNUP_PASSWORD,
                          "redirect_url": ALLOWED_REDIRECT})
    verify = mailbox.one()
    _assert_own_pages(verify, settings, "verify", "shop")  # not the shop's account yet
    actions.confirm_verification(conn, svc, token=_token(verify), password="owner passphrase 1")
    assert _apps_of(conn, ANN) == set()
    evil.post("/password-resets", {"email": ANN, "redirect_url": EVIL_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "reset", "Evil Corp")
    api.post("/password-resets", {"email": ANN, "redirect_url": ALLOWED_REDIRECT})
    _assert_own_pages(mailbox.one(), settings, "reset", "shop")


def test_the_relation_is_written_with_the_signup_and_the_completed_flow(api, evil, conn, svc,
                                                                       mailbox):
    api.sign_up(ANN)
    rows = conn.execute("SELECT u.email, a.name FROM account_apps AS m JOIN users AS u"
                        " ON u.id = m.user_id JOIN apps AS a ON a.id = m.app_id").fetchall()
    assert rows == [(ANN, "shop")]
    actions.confirm_verification(conn, svc, token=_token(mailbox.one()))
    assert _apps_of(conn, ANN) == {"shop"}  # proven through the shop's own email: kept
    evil.post("/password-resets", {"email": ANN})
    actions.reset_password(conn, svc, token=_token(mailbox.one()), password="a new passphrase 2")
    assert _apps_of(conn, ANN) == {"shop"}  # a flow the other app's redirect did not serve


HOSTILE_NAMES = [
    "<b>Shop</b><a href=\"https://evil.example/x\">click</a>",
    "Shop\r\nBcc: victim@evil.example\r\n\r\nhttps://evil.example/steal",
    "Shop — reset at https://evil.example/steal now",
    "Shop www.evil.example evil.example/steal owner@evil.example",
    "Shop\u202e\u200belgoog.evil.example",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_an_app_name_cannot_inject_markup_headers_or_links(conn, svc, api, mailbox, settings,
                                                           name):
    app, key = register_app(conn, name, [])
    hostile = ApiCaller(api.client, app, key)
    api.sign_up(ANN)
    mailbox.new()
    hostile.post("/password-resets", {"email": ANN})
    message = mailbox.one()
    html = message.html
    assert "<b>" not in html and "href=\"https://evil" not in html
    assert message.header("Bcc") is None
    assert sorted(message.message.keys()) == sorted(mailbox.smtp.messages[0].message.keys())
    for part in (message.text, html):
        assert "evil.example" not in part and "://evil" not in part and "@evil" not in part
        assert "\u202e" not in part and "\u200b" not in part
    shown = next(line for line in message.text.splitlines() if "Requested through" in line)
    assert shown.startswith("Requested through the app “") and shown.endswith("”.")
