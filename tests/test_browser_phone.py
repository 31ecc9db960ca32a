"""The pages, the test inbox and the emails on a phone: Chromium at 390 px wide.

What a person would notice is measured, not the CSS: an element reaching past
the screen's edge, a word or date broken across two lines, a one-word button
stacked a letter per line. Screenshots go to the test's temp folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from authsvc.accounts import actions
from authsvc.accounts.users import find_user_by_email
from authsvc.config import load_settings
from tests.browser_support import BROWSER_MARKS, new_tab
from tests.inbox_support import email, send, serve_front
from tests.pages_support import PASSWORD, make_account
from tests.worker_support import claimed_job, renderer

pytestmark = BROWSER_MARKS

PHONE = {"width": 390, "height": 844}
CHROME_156 = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/156.0.0.0 Safari/537.36"
)
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
# Longer than a phone's line and without a hyphen (where browsers may break
# anyway): it must wrap, not overflow.
LONG_ADDRESS = (
    "firstname.lastname.accounts.payable.department+checkout.run.1234567890"
    "@mail.subsidiary.examplecompany.test"
)

# Elements under `selector` that reach past the viewport, and words (runs of
# non-space text) that the layout split across lines.
_MEASURE = """
(selector) => {
  // Visually hidden text (a 1 px clipped box) is for screen readers, not the layout.
  const hidden = (el) => {
    for (; el; el = el.parentElement) {
      if (el.getBoundingClientRect().width <= 1) return true;
    }
    return false;
  };
  const width = document.documentElement.clientWidth;
  const found = {width, scrollWidth: document.documentElement.scrollWidth,
                 outside: [], split: []};
  for (const root of document.querySelectorAll(selector)) {
    for (const el of [root, ...root.querySelectorAll('*')]) {
      if (hidden(el)) continue;
      const box = el.getBoundingClientRect();
      if (box.width && (box.left < -0.5 || box.right > width + 0.5)) {
        found.outside.push(`${el.tagName.toLowerCase()}.${el.className} ${box.left}..${box.right}`);
      }
    }
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (hidden(node.parentElement)) continue;
      for (const word of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0)
                                .map(r => Math.round(r.top)));
        if (lines.size > 1) found.split.push(word[0]);
      }
    }
  }
  return found;
}
"""


def fits_the_screen(tab: Page, selector: str, *, words_whole: bool = True) -> None:
    found: dict[str, Any] = tab.evaluate(_MEASURE, selector)
    assert found["outside"] == [], f"wider than the {found['width']} px screen"
    assert found["scrollWidth"] <= found["width"], "the page scrolls sideways"
    if words_whole:
        assert found["split"] == [], "words broken across lines"


@pytest.fixture
def phone(browser) -> Iterator[Page]:
    with new_tab(browser, viewport=PHONE, user_agent=CHROME_156) as tab:
        yield tab


@pytest.mark.parametrize("width", [390, 1024])
def test_the_account_sessions_table_fits_the_screen(phone, base_url, conn, svc, tmp_path, width):
    phone.set_viewport_size({"width": width, "height": 844})  # and a desk's screen
    make_account(conn, svc)
    user = find_user_by_email(conn, "ann@example.com")
    assert user is not None
    actions.start_session(conn, svc, user=user, user_agent=IPHONE)
    actions.start_session(conn, svc, user=user, user_agent="")

    phone.goto(f"{base_url}/login")
    phone.get_by_label("Email address").fill("ann@example.com")
    phone.get_by_label("Password").fill(PASSWORD)
    phone.get_by_role("button", name="Log in").click()
    expect(phone).to_have_url(f"{base_url}/account")
    phone.screenshot(path=str(tmp_path / f"account-{width}.png"), full_page=True)

    table = phone.locator("table.sessions")
    expect(table).to_contain_text("Chrome 156 on Linux (this browser)")
    expect(table).to_contain_text("Safari 17 on iOS")
    expect(table).to_contain_text("Unknown browser")
    expect(table).not_to_contain_text("Mozilla")
    fits_the_screen(phone, "table.sessions")

    # "End" on one line, as wide as its word: as tall as the one-line button below.
    one_line = phone.get_by_role("button", name="End every session").bounding_box()
    assert one_line is not None
    ends = phone.locator("table.sessions button")
    expect(ends).to_have_count(3)
    for i in range(3):
        box = ends.nth(i).bounding_box()
        assert box is not None
        assert box["height"] <= one_line["height"] + 1, f"End button {i} wraps: {box}"


@pytest.fixture
def inbox_url(sink, env, pool, passwords, clock) -> Iterator[str]:
    yield from serve_front(sink, env, pool, passwords, clock)


def test_the_inbox_tables_fit_a_phone(phone, inbox_url, sink, tmp_path):
    send(sink.port, email("qa+checkout-42@inbox.test", subject="Confirm your email address"))
    long_recipient = "firstname.lastname.accounts.payable.department+checkout-42@inbox.test"
    send(sink.port, email(["qa+checkout-42@inbox.test", long_recipient, LONG_ADDRESS],
                          subject="Reset your password", message_id="<authsvc-job-1@localhost>"),
         recipients=["qa+checkout-42@inbox.test", long_recipient])
    phone.goto(f"{inbox_url}/_inbox/")
    expect(phone.get_by_role("status")).to_contain_text("Live: updated")  # rows rebuilt
    expect(phone.get_by_role("link", name="checkout-42")).to_be_visible()
    phone.screenshot(path=str(tmp_path / "inbox-index-390.png"), full_page=True)
    fits_the_screen(phone, "main")

    fits_the_screen(phone, "header")  # the search box too

    phone.get_by_role("link", name="checkout-42").click()
    expect(phone.get_by_role("heading", name="Scope checkout-42")).to_be_visible()
    expect(phone.get_by_role("status")).to_contain_text("Live: updated")  # rows rebuilt live
    phone.screenshot(path=str(tmp_path / "inbox-scope-390.png"), full_page=True)
    expect(phone.get_by_role("cell", name=long_recipient, exact=False)).to_be_visible()
    fits_the_screen(phone, "main table", words_whole=False)  # the long address must wrap
    fits_the_screen(phone, "main table time, main table a, main table th")

    phone.get_by_role("link", name="Reset your password").click()
    expect(phone.get_by_role("heading", name="Reset your password")).to_be_visible()
    phone.screenshot(path=str(tmp_path / "inbox-message-390.png"), full_page=True)
    fits_the_screen(phone, "main", words_whole=False)
    fits_the_screen(phone, "main table.headers th")

    phone.goto(f"{inbox_url}/_inbox/ui/search?q=to%3Acheckout-42")
    expect(phone.locator("#results tbody tr")).to_have_count(2)
    phone.screenshot(path=str(tmp_path / "inbox-search-390.png"), full_page=True)
    fits_the_screen(phone, "main table", words_whole=False)  # the long address must wrap
    fits_the_screen(phone, "main table time, main table a, main table th, main p")


# As long as an address the worker sends to may be (a local part of at most 64 characters).
LONG_RECIPIENT = "firstname.lastname.accounts.payable+checkout.run.1234567890" \
    "@mail.subsidiary.examplecompany.test"


def _email_html(env: dict[str, str], template: str) -> str:
    """The email's HTML part as the worker renders it, to a long address."""
    settings = load_settings(env, AUTHSVC_BASE_URL="https://auth.example.com")
    return renderer(settings).render(claimed_job(template, LONG_RECIPIENT)).html


@pytest.mark.parametrize("template", ["verify", "reset", "account_exists", "password_changed"])
def test_an_email_with_a_long_address_fits_a_phone(phone, env, template, tmp_path):
    phone.set_content(_email_html(env, template))
    assert LONG_RECIPIENT in phone.inner_text("body")
    phone.screenshot(path=str(tmp_path / f"{template}-390.png"), full_page=True)
    fits_the_screen(phone, "body", words_whole=False)


def test_the_icon_is_linked_and_loads(phone, base_url, sink, env, pool, clock, passwords):
    for path in ("/login", "/no-such-page"):
        phone.goto(f"{base_url}{path}")
        href = phone.locator("link[rel=icon]").get_attribute("href")
        assert href, f"{path} links no icon"
        answer = phone.request.get(f"{base_url}{href}")
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("image/svg+xml")
    for inbox_url in serve_front(sink, env, pool, passwords, clock):
        phone.goto(f"{inbox_url}/_inbox/")
        # The inbox serves the same icon itself: it has one when run without the web app.
        inbox_href = phone.locator("link[rel=icon]").get_attribute("href")
        assert inbox_href == "/_inbox/favicon.svg"
        mine, theirs = (phone.request.get(f"{inbox_url}{h}") for h in (inbox_href, href))
        assert mine.status == 200 and mine.body() == theirs.body()
        assert mine.headers["content-type"].startswith("image/svg+xml")
