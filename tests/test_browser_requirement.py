"""Browser tests skip where Chromium, Playwright or axe-core is missing, except under
AUTHSVC_REQUIRE_BROWSER=1 (CI), where the same test fails: a suite cannot pass green
without having run them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.browser_support import NEEDS_MARK, REQUIRE_ENV, needs
from tests.conftest import pytest_runtest_setup


def _item(missing: str | None) -> pytest.Item:
    """Just what the hook reads of a collected test: its marks."""
    marks = [needs(missing).mark]
    return cast(pytest.Item, SimpleNamespace(
        iter_markers=lambda name: [m for m in marks if m.name == name]))


def test_the_mark_is_the_one_the_setup_hook_reads() -> None:
    assert needs("x").mark.name == NEEDS_MARK


def test_a_missing_tool_skips_the_test(monkeypatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="Chromium is not installed"):
        pytest_runtest_setup(_item("Chromium is not installed"))


@pytest.mark.parametrize("missing", ["Chromium is not installed at /usr/bin/chromium",
                                     "Playwright is not installed",
                                     "axe-core is not installed"])
def test_under_the_switch_a_missing_tool_fails_the_test(monkeypatch, missing) -> None:
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{missing}, and {REQUIRE_ENV}=1"):
        pytest_runtest_setup(_item(missing))


def test_a_present_tool_runs_the_test_either_way(monkeypatch) -> None:
    for value in ("1", "0"):
        monkeypatch.setenv(REQUIRE_ENV, value)
        pytest_runtest_setup(_item(None))
