"""The account page names a session's browser the way its owner would."""

from __future__ import annotations

import pytest

from authsvc.web.pages.user_agents import describe_user_agent

CASES = [
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/156.0.0.0 Safari/537.36", "Chrome 156 on Linux"),
    ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "HeadlessChrome/141.0.7390.54 Safari/537.36", "Chrome 141 on Linux"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0",
     "Firefox 128 on Windows"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
     "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", "Safari 17 on iOS"),
    ("Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 "
     "(KHTML, like Gecko) Version/18.1 Safari/605.1.15", "Safari 18 on macOS"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86", "Edge 131 on Windows"),
    ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.6778.81 Mobile Safari/537.36", "Chrome 131 on Android"),
    ("Mozilla/5.0 (Linux; Android 14; SM-S911B) AppleWebKit/537.36 (KHTML, like Gecko) "
     "SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
     "Samsung Internet 26 on Android"),
    ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
     "(KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", "Chrome 131 on iOS"),
    ("Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
     "FxiOS/132.0 Mobile/15E148 Safari/605.1.15", "Firefox 132 on iOS"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0", "Opera 115 on Windows"),
    ("Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) "
     "Chrome/131.0.0.0 Safari/537.36", "Chrome 131 on ChromeOS"),
    ("Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
     "Firefox 133 on Linux"),
    ("curl/8.5.0", "Unknown browser"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64)", "Unknown browser on Windows"),
    ("", "Unknown browser"),
    (None, "Unknown browser"),
]


@pytest.mark.parametrize(("header", "shown"), CASES)
def test_a_user_agent_reads_as_browser_version_and_system(header, shown):
    assert describe_user_agent(header) == shown


def test_a_hostile_header_is_summarised_not_echoed():
    shown = describe_user_agent("<script>alert(1)</script> Chrome/99999999999999999999")
    assert "<" not in shown and shown.startswith("Chrome ")
