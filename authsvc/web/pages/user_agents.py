"""A User-Agent header said the way a person recognises their browser: "Chrome 156 on Linux".

The account page lists sessions by browser; the raw header is a paragraph of
compatibility tokens nobody can read. Two small tables, checked in order,
are enough for the browsers people use; anything else is "Unknown browser".
"""

from __future__ import annotations

import re

# First match wins, so the tables list the specific before the general:
# Edge, Opera and Samsung Internet also say "Chrome/", Chrome also says
# "Safari/", and iPhones say "like Mac OS X".
_BROWSERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Edge", re.compile(r"\bEdg(?:e|A|iOS)?/(\d+)")),
    ("Opera", re.compile(r"\b(?:OPR|OPT)/(\d+)")),
    ("Samsung Internet", re.compile(r"\bSamsungBrowser/(\d+)")),
    ("Firefox", re.compile(r"\b(?:Firefox|FxiOS)/(\d+)")),
    ("Chrome", re.compile(r"(?:Chrome|CriOS)/(\d+)")),  # HeadlessChrome/ too
    ("Safari", re.compile(r"\bVersion/(\d+)[.\d]*(?: Mobile/\S+)? Safari/")),
)
_SYSTEMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("iOS", re.compile(r"\b(?:iPhone|iPad|iPod)\b")),
    ("Android", re.compile(r"\bAndroid\b")),
    ("Windows", re.compile(r"\bWindows\b")),
    ("ChromeOS", re.compile(r"\bCrOS\b")),
    ("macOS", re.compile(r"\bMac OS X\b|\bMacintosh\b")),
    ("Linux", re.compile(r"\bLinux\b|\bX11\b")),
)

UNKNOWN_BROWSER = "Unknown browser"


def describe_user_agent(header: str | None) -> str:
    """'Chrome 156 on Linux', 'Safari 17 on iOS', 'Firefox 128', 'Unknown browser on Windows'."""
    header = header or ""
    browser = UNKNOWN_BROWSER
    for name, pattern in _BROWSERS:
        found = pattern.search(header)
        if found:
            browser = f"{name} {int(found.group(1))}"
            break
    for name, pattern in _SYSTEMS:
        if pattern.search(header):
            return f"{browser} on {name}"
    return browser
