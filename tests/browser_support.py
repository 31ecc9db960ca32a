"""Debian's Chromium under Playwright, as the browser tests launch it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_TIMEOUT_MS = 15_000
ROOT = Path(__file__).resolve().parent.parent
# axe-core, injected from disk (`make browser` installs it; no CDN).
AXE = ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
DOC_SCREENSHOTS = ROOT / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

# AUTHSVC_REQUIRE_BROWSER=1 (CI): a browser test whose Chromium, Playwright or axe-core
# is missing fails instead of being skipped, so a suite that never ran them cannot pass.
REQUIRE_ENV = "AUTHSVC_REQUIRE_BROWSER"
NEEDS_MARK = "needs_tool"


def required() -> bool:
    return os.environ.get(REQUIRE_ENV) == "1"


def _browser_missing() -> str | None:
    if not CHROMIUM.exists():
        return f"Chromium is not installed at {CHROMIUM} (make browser)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed (make install)"
    return None


def _axe_missing() -> str | None:
    return None if AXE.exists() else f"axe-core is not installed at {AXE} (make browser)"


def needs(missing: str | None) -> pytest.MarkDecorator:
    """A test that needs a tool: skipped when `missing` says it is absent, or failed at
    setup under AUTHSVC_REQUIRE_BROWSER=1 (tests/conftest.py, pytest_runtest_setup)."""
    return getattr(pytest.mark, NEEDS_MARK)(missing)


# Every browser test: marked (Chromium is a process), and needing Chromium and Playwright.
BROWSER_MARKS = [pytest.mark.browser, pytest.mark.e2e, needs(_browser_missing())]
# The tests that scan pages with axe-core.
AXE_MARK = needs(_axe_missing())


@contextmanager
def launched_chromium() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    # expect()'s own default is 5 s, apart from the tab's: a live page's update (event
    # stream, NOTIFY, DOM) on a busy 2-core machine gets the same 15 s as every action.
    expect.set_options(timeout=BROWSER_TIMEOUT_MS)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextmanager
def new_tab(browser: Any, **context_options: Any) -> Iterator[Any]:
    """A page in a fresh browser context (closed after the block), 15 s default timeout."""
    context = browser.new_context(**context_options)
    tab = context.new_page()
    tab.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        yield tab
    finally:
        context.close()


def serious_violations(tab: Any, *, iframes: bool = True) -> list[dict[str, Any]]:
    """axe-core's serious and critical findings on the page `tab` shows (its context must
    bypass the CSP, which would refuse the injected script)."""
    tab.add_script_tag(path=str(AXE))
    options = "{resultTypes: ['violations']" + ("" if iframes else ", iframes: false") + "}"
    result = tab.evaluate(f"axe.run(document, {options})")
    return [{"id": v["id"], "impact": v["impact"], "nodes": [n["html"] for n in v["nodes"]][:3]}
            for v in result["violations"] if v["impact"] in ("serious", "critical")]
