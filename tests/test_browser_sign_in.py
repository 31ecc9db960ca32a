"""Signing in by email in a real browser (Debian's Chromium, JavaScript switched off).

The app runs under a real WSGI server in a thread against the test database;
the links and codes are minted from the queued outbox rows exactly as the
worker would (tests/test_browser_pages.py runs the real-email path).
"""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser_support import BROWSER_MARKS, new_tab
from tests.link_support import latest_code, latest_link
from tests.pages_support import make_account

pytestmark = BROWSER_MARKS


def _session_cookie(page) -> str | None:
    return next((c["value"] for c in page.context.cookies() if c["name"] == "session"), None)


def test_email_me_a_sign_in_link_then_sign_in_in_a_browser(page, base_url, conn, svc):
    make_account(conn, svc)
    page.goto(f"{base_url}/login")
    page.get_by_label("Email address").fill("ann@example.com")
    page.screenshot(path="/tmp/authsvc-login.png", full_page=True)
    page.get_by_role("button", name="Email me a sign-in link").click()
    expect(page.get_by_text("a link that signs you in is on its way", exact=False)).to_be_visible()
    before = _session_cookie(page)

    link = f"{base_url}/sign-in?token={latest_link(conn, svc, 'ann@example.com', 'sign_in')}"
    page.goto(link)
    expect(page.get_by_text("Sign in as ann@example.com.")).to_be_visible()
    page.screenshot(path="/tmp/authsvc-sign-in.png", full_page=True)
    assert conn.execute("SELECT count(*) FROM web_sessions").fetchone() == (0,)

    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    assert _session_cookie(page) not in (None, before)
    assert conn.execute("SELECT started_by FROM web_sessions").fetchall() == [("sign_in",)]

    page.goto(link)
    expect(page.get_by_role("heading", name="This link was already used")).to_be_visible()


def test_sign_in_with_the_code_on_another_device(browser, base_url, conn, svc):
    make_account(conn, svc)
    with new_tab(browser, java_script_enabled=False) as asking:
        asking.goto(f"{base_url}/sign-in/request")
        asking.get_by_label("Email address").fill("ann@example.com")
        asking.get_by_role("button", name="Send link").click()
        asking.get_by_role("link", name="enter the code here").click()
        asking.get_by_label("Email address").fill("ann@example.com")
        asking.get_by_label("Code from the email").fill(
            latest_code(conn, svc, "ann@example.com", "sign_in"))
        asking.get_by_role("button", name="Sign in").click()
        expect(asking.get_by_role("heading", name="Your account")).to_be_visible()
