"""The inbox's live pages in Chromium: what a sender wrote stays text, and the index empties.

The pages' server-rendered escaping is checked in tests/test_inbox_markup.py;
here the same email lands while the index and the scope page are open, and
live.js must write every field as text: no element of the sender's, no
dialog, the text shown as written. The index follows its last scope away.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Dialog, Page, expect

from authsvc.inbox.messages import prune_messages
from tests.browser_support import BROWSER_MARKS, new_tab
from tests.inbox_markup_support import ENVELOPE_TO, SCOPE, SUBJECT, send_hostile
from tests.inbox_support import HttpClient, email, send, serve_front

pytestmark = BROWSER_MARKS


@pytest.fixture
def url(sink, env, pool, passwords, clock) -> Iterator[str]:
    yield from serve_front(sink, env, pool, passwords, clock)


def _watched(page: Page, dialogs: list[str]) -> Page:
    def seen(dialog: Dialog) -> None:  # an alert() of the sender's ran
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", seen)
    return page


def _nothing_of_the_senders(page: Page) -> None:
    elements: dict[str, Any] = page.evaluate(
        """() => ({ img: document.querySelectorAll('img').length,
                    scripts: [...document.scripts].map(s => s.getAttribute('src')) })""")
    assert elements == {"img": 0, "scripts": ["/_inbox/static/live.js"]}


def test_live_rows_show_the_senders_markup_as_text(browser, url, sink):
    dialogs: list[str] = []
    with new_tab(browser) as index, new_tab(browser) as scope:
        _watched(index, dialogs).goto(f"{url}/_inbox/")
        _watched(scope, dialogs).goto(f"{url}/_inbox/ui/scopes/{SCOPE}")
        for page in (index, scope):
            expect(page.get_by_role("status")).to_contain_text("Live: updated")

        send_hostile(sink.port)
        expect(scope.get_by_role("link", name=SUBJECT)).to_be_visible()  # without a reload
        expect(scope.locator("#messages tbody td.to")).to_have_text(ENVELOPE_TO)
        expect(index.get_by_role("link", name=SCOPE)).to_be_visible()
        expect(index.locator("#scopes tbody tr td").nth(2)).to_have_text(SUBJECT)
        for page in (index, scope):
            _nothing_of_the_senders(page)

        scope.get_by_role("link", name=SUBJECT).click()
        expect(scope.get_by_role("heading", name=SUBJECT)).to_be_visible()
        expect(scope.get_by_role("status")).to_contain_text("Live: updated")
        _nothing_of_the_senders(scope)
    assert dialogs == []


EMPTY_INDEX = "No mail yet. Send to anything+SCOPE@inbox.test."


def test_the_index_empties_when_its_last_scope_is_deleted_or_pruned(browser, url, sink, conn):
    send(sink.port, email("qa+only-one@inbox.test", subject="The only mail"))
    with new_tab(browser) as index:
        index.goto(f"{url}/_inbox/")
        expect(index.get_by_role("link", name="only-one")).to_be_visible()
        expect(index.get_by_role("status")).to_contain_text("Live: updated")
        assert HttpClient(url).delete("/_inbox/scopes/only-one").status_code == 204
        expect(index.get_by_role("link", name="only-one")).to_have_count(0)  # without a reload
        expect(index.locator("#scopes tbody")).to_have_text(EMPTY_INDEX)

        send(sink.port, email("qa+aged@inbox.test", subject="Old news"))
        expect(index.get_by_role("link", name="aged")).to_be_visible()
        assert prune_messages(conn, retention_seconds=0) == 1  # as if a day had passed
        expect(index.get_by_role("link", name="aged")).to_have_count(0)
        expect(index.locator("#scopes tbody")).to_have_text(EMPTY_INDEX)
        index.reload()  # as the server renders it
        expect(index.locator("#scopes tbody")).to_have_text(EMPTY_INDEX)
