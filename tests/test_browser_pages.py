"""The pages in a real browser (Debian's Chromium, JavaScript switched off).

The app runs under a real WSGI server in a thread against the test database.
Emails are not sent here (that is the worker's job): the links are minted
from the queued outbox rows exactly as the worker would mint them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect
from werkzeug.serving import make_server

from authsvc.users import find_user_by_email
from tests.pages_support import PASSWORD, latest_link, make_account

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Chromium is not installed at /usr/bin/chromium"
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def base_url(app) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture
def page(browser):
    # No JavaScript: every page must work with plain HTML forms.
    context = browser.new_context(java_script_enabled=False)
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    yield tab
    context.close()


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
    assert find_user_by_email(conn, "ann@example.com").email_verified_at is None

    page.get_by_role("button", name="Confirm my email address").click()
    expect(page.get_by_role("heading", name="Email address confirmed")).to_be_visible()
    assert find_user_by_email(conn, "ann@example.com").email_verified_at is not None

    page.goto(link)
    expect(page.get_by_role("heading", name="This link was already used")).to_be_visible()


def test_reset_the_password_then_log_in_in_a_browser(page, base_url, conn, svc):
    make_account(conn, svc)
    page.goto(f"{base_url}/login")
    page.get_by_role("link", name="Forgot your password?").click()
    page.get_by_label("Email address").fill("ann@example.com")
    page.get_by_role("button", name="Send link").click()
    expect(
        page.get_by_text("If an account exists for that address, we sent a link")
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
    page.get_by_role("button", name="Confirm my email address").click()
    expect(page.get_by_role("heading", name="Email address confirmed")).to_be_visible()
