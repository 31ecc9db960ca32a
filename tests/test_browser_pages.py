"""The pages in a real browser (Debian's Chromium, JavaScript switched off).

The app runs under a real WSGI server in a thread against the test database.
Most tests mint links from the queued outbox rows exactly as the worker
would; the last one runs `authsvc dev` and reads the links from real email.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from authsvc.testing import ScopedInbox
from testkit.waiting import free_ports, wait_until_ready
from tests.accounts_support import stored_user
from tests.browser_support import BROWSER_MARKS
from tests.conftest import TEST_KEY
from tests.link_support import latest_link
from tests.pages_support import PASSWORD, make_account

pytestmark = BROWSER_MARKS


def test_sign_up_then_confirm_the_email_in_a_browser(page, base_url, conn, svc):
    page.goto(f"{base_url}/signup")
    page.get_by_label("Email address").fill("Ann@Example.com")
    page.get_by_label("Password").fill(PASSWORD)
    page.screenshot(path="/tmp/authsvc-signup.png", full_page=True)
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()

    link = f"{base_url}/verify?token={latest_link(conn, svc, 'ann@example.com', 'verify')}"
    page.goto(link)
    expect(page.get_by_text("Confirm that ann@example.com is your address.")).to_be_visible()
    page.screenshot(path="/tmp/authsvc-verify.png", full_page=True)
    assert stored_user(conn, "ann@example.com").email_verified_at is None

    page.get_by_role("button", name="Confirm my email address").click()
    expect(page.get_by_role("heading", name="Email address confirmed")).to_be_visible()
    assert stored_user(conn, "ann@example.com").email_verified_at is not None

    page.goto(link)
    expect(page.get_by_role("heading", name="This link was already used")).to_be_visible()


def test_reset_the_password_then_log_in_in_a_browser(page, base_url, conn, svc):
    make_account(conn, svc)
    page.goto(f"{base_url}/login")
    page.get_by_role("link", name="Forgot your password?").click()
    page.get_by_label("Email address").fill("ann@example.com")
    page.get_by_role("button", name="Send link").click()
    expect(
        page.get_by_text("a link to choose a new password is on its way", exact=False)
    ).to_be_visible()

    page.goto(
        f"{base_url}/reset/confirm?token={latest_link(conn, svc, 'ann@example.com', 'reset')}"
    )
    page.get_by_label("New password").fill("a brand new passphrase")
    page.get_by_role("button", name="Set new password").click()
    expect(page).to_have_url(f"{base_url}/login")
    notice = page.get_by_text("Your password was changed. Log in with your new password.")
    expect(notice).to_be_visible()

    page.get_by_label("Email address").fill("ann@example.com")
    page.get_by_label("Password").fill("a brand new passphrase")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base_url}/account")
    expect(page.get_by_text("ann@example.com").first).to_be_visible()
    expect(page.get_by_text("Confirmed on")).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_text("You are logged out.")).to_be_visible()


def test_expired_link_resends_with_one_click_in_a_browser(page, base_url, conn, svc, clock):
    make_account(conn, svc, verified=False)
    old = latest_link(conn, svc, "ann@example.com", "verify")
    clock.advance(svc.settings.verify_ttl + 1)
    page.goto(f"{base_url}/verify?token={old}")
    expect(page.get_by_role("heading", name="This link expired")).to_be_visible()
    page.screenshot(path="/tmp/authsvc-expired.png", full_page=True)
    page.get_by_role("button", name="Send a new link").click()
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()

    page.goto(f"{base_url}/verify?token={latest_link(conn, svc, 'ann@example.com', 'verify')}")
    # A resent link's confirmer chooses the password (SPEC §4a: anyone can ask for one).
    page.get_by_label("Choose your password").fill("chosen in the browser 1")
    page.get_by_role("button", name="Confirm my email address").click()
    expect(page.get_by_role("heading", name="Email address confirmed")).to_be_visible()


@pytest.fixture
def stack(database_url: str, direct_database_url: str, tmp_path: Path) -> Iterator[str]:
    """`authsvc dev` on free ports against this test's database; yields its URL."""
    port, smtp_port = free_ports(2)
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "AUTHSVC_ENV": "test",
        "AUTHSVC_DATABASE_URL": database_url,
        "AUTHSVC_DIRECT_DATABASE_URL": direct_database_url,
        "AUTHSVC_DATA_DIR": str(tmp_path / "data"),
        "AUTHSVC_SECRET_KEYS": TEST_KEY,
        "AUTHSVC_BASE_URL": url,
    }
    log = (tmp_path / "dev.log").open("wb")
    dev = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "authsvc.cli",
            "dev",
            "--port",
            str(port),
            "--smtp-port",
            str(smtp_port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_ready(f"{url}/readyz", dev, output=(tmp_path / "dev.log").read_text)
        yield url
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.wait(timeout=30)
        log.close()


def test_sign_up_confirm_reset_and_log_in_through_real_email(stack, page):
    inbox = ScopedInbox(stack)
    inbox.new_scope()
    address = inbox.address("ann")

    page.goto(f"{stack}/signup")
    page.get_by_label("Email address").fill(address)
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("heading", name="Check your email")).to_be_visible()

    page.goto(inbox.link(inbox.expect_one(timeout=20), containing="/verify?token="))
    page.get_by_role("button", name="Confirm my email address").click()
    expect(page.get_by_role("heading", name="Email address confirmed")).to_be_visible()

    page.goto(f"{stack}/reset")
    page.get_by_label("Email address").fill(address)
    page.get_by_role("button", name="Send link").click()
    reset_email = inbox.expect_one(timeout=20)
    page.goto(inbox.link(reset_email, containing="/reset/confirm?token="))
    page.get_by_label("New password").fill("a brand new passphrase")
    page.get_by_role("button", name="Set new password").click()
    expect(
        page.get_by_text("Your password was changed. Log in with your new password.")
    ).to_be_visible()
    assert "password was changed" in (inbox.expect_one(timeout=20).subject or "").lower()

    page.get_by_label("Email address").fill(address)
    page.get_by_label("Password").fill("a brand new passphrase")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{stack}/account")
    expect(page.get_by_text(address)).to_be_visible()
