"""The test inbox's pages in Chromium, through the inbox server: live list, sandboxed mail, axe.

axe-core comes from the npm registry into tests/browser/node_modules (see
tests/browser/package.json; `make browser` installs it) and is injected from
disk, never from a CDN. Screenshots go to the test's temp folder; with
AUTHSVC_UPDATE_SCREENSHOTS=1 they refresh docs/screenshots/ (no test writes
into the checkout by default).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser_support import BROWSER_MARKS, new_tab
from tests.inbox_support import email, send, serve_front
from tests.inbox_ui_support import links_in_each_state, send_links_email

ROOT = Path(__file__).resolve().parent.parent
AXE = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
DOC_SCREENSHOTS = ROOT / "docs" / "screenshots"

pytestmark = [
    *BROWSER_MARKS,
    pytest.mark.skipif(not AXE.exists(), reason="axe-core is not installed (make browser)"),
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

    def serious_violations(address: str) -> list[dict[str, Any]]:
        tab.goto(address)
        tab.add_script_tag(path=str(AXE))
        # The email's own HTML (third-party content, in a sandboxed frame) is not ours to audit.
        result = tab.evaluate("axe.run(document, {iframes: false, resultTypes: ['violations']})")
        return [
            {"id": v["id"], "impact": v["impact"], "nodes": [n["html"] for n in v["nodes"]][:3]}
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]

    yield serious_violations
    context.close()


@pytest.fixture
def screenshots(tmp_path):
    """Where screenshots go: docs/screenshots/ only when asked to refresh them."""
    if os.environ.get("AUTHSVC_UPDATE_SCREENSHOTS") == "1":
        return DOC_SCREENSHOTS
    return tmp_path


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
    assert frame.get_attribute("sandbox") == ""  # no allow-scripts, no allow-same-origin
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
