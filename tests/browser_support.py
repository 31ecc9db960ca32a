"""Debian's Chromium under Playwright, as the browser tests launch it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
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

# Every browser test: marked (Chromium is a process), skipped where there is none.
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.e2e,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium is not installed at {CHROMIUM}"),
]


@contextmanager
def launched_chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

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
    tab.set_default_timeout(15_000)
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
