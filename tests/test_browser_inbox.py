"""The test inbox's pages in Chromium, through the inbox server: live list, sandboxed mail, axe.

axe-core comes from the npm registry into tests/browser/node_modules (see
tests/browser/package.json; `make browser` installs it) and is injected from
disk, never from a CDN. Screenshots go to the test's temp folder; with
AUTHSVC_UPDATE_SCREENSHOTS=1 they refresh docs/screenshots/ (no test writes
into the checkout by default).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from authsvc.accounts import actions
from tests.browser_support import AXE_MARK, BROWSER_MARKS, new_tab, serious_violations
from tests.inbox_support import email, send, serve_front
from tests.inbox_ui_support import links_in_each_state, send_links_email

pytestmark = [
    *BROWSER_MARKS,
    AXE_MARK,
]


@pytest.fixture
def url(sink, env, pool, passwords, clock) -> Iterator[str]:
    yield from serve_front(sink, env, pool, passwords, clock)


@pytest.fixture
def page(browser) -> Iterator[Page]:
    # JavaScript on, CSP enforced: the UI's one script must run under its own policy.
    with new_tab(browser, viewport={"width": 1100, "height": 800}) as tab:
        yield tab


@pytest.fixture
def audit(browser) -> Iterator[Any]:
    """axe-core on a page; its own context bypasses the CSP only to inject axe."""
    context = browser.new_context(bypass_csp=True)
    tab = context.new_page()

    def audited(address: str) -> list[dict[str, Any]]:
        tab.goto(address)
        # The email's own HTML (third-party content, in a sandboxed frame) is not ours to audit.
        return serious_violations(tab, iframes=False)

    yield audited
    context.close()


def test_the_scope_list_updates_live_when_mail_arrives(page, url, sink, audit, screenshots):
    page.goto(f"{url}/_inbox/")
    expect(page.get_by_role("heading", name="Recent scopes")).to_be_visible()
    expect(page.get_by_text("No mail yet")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("Live: updated")
    send(sink.port, email("qa+checkout-42@inbox.test", subject="Confirm your email"))
    send(sink.port, email("qa+signup-7@inbox.test", subject="Reset your password"))
    link = page.get_by_role("link", name="signup-7")
    expect(link).to_be_visible()  # no reload: the event stream brought it
    expect(page.get_by_role("cell", name="Reset your password")).to_be_visible()
    screenshots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshots / "inbox-scopes.png"), full_page=True)
    link.focus()
    page.keyboard.press("Enter")  # keyboard reaches the scope page
    expect(page.get_by_role("heading", name="Scope signup-7")).to_be_visible()
    assert audit(f"{url}/_inbox/") == []
    assert audit(f"{url}/_inbox/ui/scopes/signup-7") == []


def test_a_message_renders_sandboxed_with_each_link_state(
    page, url, sink, conn, svc, audit, screenshots
):
    send_links_email(sink.port, "links", links_in_each_state(conn, svc))
    page.goto(f"{url}/_inbox/ui/scopes/links")
    page.get_by_role("link", name="Your links").click()
    expect(page.get_by_role("heading", name="Your links")).to_be_visible()

    frame = page.locator("iframe.email")
    assert frame.get_attribute("sandbox") == "allow-same-origin"  # no allow-scripts
    inside = page.frame_locator("iframe.email")
    expect(inside.get_by_role("heading", name="Hello")).to_be_visible()
    framed = next(f for f in page.frames if f.url.endswith("/html"))
    assert framed.title() != "ran", "a script in the email ran"

    items = page.locator("ul.links li")
    expect(items).to_have_count(3)
    expect(items.nth(0)).to_contain_text("used")
    expect(items.nth(1)).to_contain_text("superseded by a newer link")
    expect(items.nth(2)).to_contain_text("would redeem")
    expect(page.locator("#code")).to_have_text("123456")
    page.screenshot(path=str(screenshots / "inbox-message.png"), full_page=True)

    page.reload()  # reading the states again consumed nothing
    expect(page.locator("ul.links li").nth(2)).to_contain_text("would redeem")
    download = page.get_by_role("link", name=re.compile("Download the raw message"))
    with page.expect_download() as info:
        download.click()
    assert b"Subject: Your links" in Path(info.value.path()).read_bytes()
    assert audit(page.url) == []


HOSTILE = '<img src=x onerror="window.pwned=1">'


def test_the_scope_page_is_live_and_deletes_a_message_then_the_scope(page, url, sink, audit):
    page.goto(f"{url}/_inbox/ui/scopes/live-7")
    expect(page.get_by_role("status")).to_contain_text("Live: updated")
    expect(page.get_by_text("No messages in this scope")).to_be_visible()
    send(sink.port, email("qa+live-7@inbox.test", subject="First of two"))
    send(sink.port, email("qa+live-7@inbox.test", subject=f"Hi {HOSTILE}"))
    expect(page.get_by_role("link", name=f"Hi {HOSTILE}")).to_be_visible()  # text, not markup
    expect(page.get_by_role("link", name="First of two")).to_be_visible()  # no reload
    assert page.evaluate("window.pwned") is None
    expect(page.locator("#messages caption")).to_have_text("2 messages, newest first")
    assert audit(page.url) == []

    page.get_by_role("link", name="First of two").click()
    expect(page.get_by_role("heading", name="First of two")).to_be_visible()
    page.get_by_role("button", name="Delete this message").click()
    expect(page.get_by_role("heading", name="Scope live-7")).to_be_visible()
    expect(page.get_by_role("link", name="First of two")).to_have_count(0)
    expect(page.locator("#messages caption")).to_have_text("1 message, newest first")

    page.get_by_role("button", name="Delete this scope").click()
    expect(page.get_by_role("heading", name="Recent scopes")).to_be_visible()
    expect(page.get_by_text("Scope live-7 was deleted.")).to_be_visible()
    expect(page.get_by_role("link", name="live-7")).to_have_count(0)
    assert audit(page.url) == []


def test_the_message_page_follows_its_links_and_its_frame_fits_each_width(
    page, url, sink, conn, svc, audit
):
    links = links_in_each_state(conn, svc)
    tall = "".join(f"<p>Paragraph {n} of a long email, a line on a desk, two or more on a "
                   "phone.</p>" for n in range(40))
    send(sink.port, email("qa+tall@inbox.test", subject="A tall email",
                          text="Reset: " + links["would_redeem"],
                          html=f"<h1>Tall</h1>{tall}<p>The end.</p>"))
    page.goto(f"{url}/_inbox/ui/scopes/tall")
    page.get_by_role("link", name="A tall email").click()
    expect(page.get_by_role("status")).to_contain_text("Live: updated")
    frame = page.locator("iframe.email")
    expect(page.frame_locator("iframe.email").get_by_text("The end.")).to_be_attached()

    def fits() -> tuple[float, float, float]:
        return page.evaluate(
            """() => { const f = document.querySelector('iframe.email');
                       const d = f.contentDocument.documentElement;
                       return [f.clientHeight, d.scrollHeight, f.clientWidth]; }""")

    page.wait_for_function(
        """() => { const f = document.querySelector('iframe.email');
                   return f.clientHeight > 400 &&
                          f.contentDocument.documentElement.scrollHeight <= f.clientHeight; }""")
    desktop_height, content, desktop_width = fits()
    assert content <= desktop_height  # the frame is as tall as its email: no inner scrollbar
    page.get_by_label("Phone (375 px)").check()
    page.wait_for_function("() => document.querySelector('iframe.email').clientWidth <= 375")
    page.wait_for_function(
        """() => { const f = document.querySelector('iframe.email');
                   return f.contentDocument.documentElement.scrollHeight <= f.clientHeight; }""")
    phone_height, _, phone_width = fits()
    assert phone_width < desktop_width and phone_height > desktop_height  # lines wrap
    page.get_by_label("Desktop (full width)").check()
    page.wait_for_function(f"() => document.querySelector('iframe.email').clientHeight < "
                           f"{phone_height}")  # shrinks back: the frame is measured anew
    assert frame.get_attribute("sandbox") == "allow-same-origin"  # never scripts
    assert audit(page.url) == []

    badge = page.locator("ul.links li .badge")
    expect(badge).to_have_text("would redeem")
    actions.reset_password(conn, svc, token=links["would_redeem"].split("token=")[1],
                           password="a brand new passphrase")
    expect(badge).to_have_text("used")  # without a reload: the message's stream read it again


def test_search_from_the_header_finds_mail_in_every_scope(page, url, sink, audit):
    send(sink.port, email("qa+alpha@inbox.test", subject="Reset your password"))
    send(sink.port, email("qa+beta@inbox.test", subject=f"Reset {HOSTILE}"))
    send(sink.port, email("qa+gamma@inbox.test", subject="Confirm your email"))
    page.goto(f"{url}/_inbox/")
    page.get_by_label("Search all scopes").fill("subject:reset")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Search all scopes")).to_be_visible()
    results = page.locator("#results tbody tr")
    expect(results).to_have_count(2)
    expect(page.get_by_role("link", name=f"Reset {HOSTILE}")).to_be_visible()
    assert page.evaluate("window.pwned") is None
    expect(page.get_by_role("link", name="gamma")).to_have_count(0)
    assert audit(page.url) == []
    page.get_by_label("Search all scopes").fill('subject:"reset')
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("unclosed double quote")
    assert audit(page.url) == []
