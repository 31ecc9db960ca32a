"""Open redirects: a link target outside an app's allowlist is never accepted.

The email link goes to the app's `redirect_url` with the token attached, so a
target that a browser resolves to another host (or another tenant's path on
a shared host) would hand the token to an attacker.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from authsvc.apps.keys import is_allowed_redirect, register_app
from tests.api_support import assert_problem

ALLOWLIST = ["https://ok.example.com/app", "http://localhost:3000/"]

HOSTILE = [
    "//evil.net/app",
    "///evil.net/app",
    "/app",
    "javascript:alert(1)",
    "JavaScript:alert(document.cookie)",
    "java\tscript:alert(1)",
    " javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "https://ok.example.com.evil.net/app",
    "https://ok.example.com%2eevil.net/app",
    "https://ok.example.com\u3002evil.net/app",  # ideographic full stop: a dot to browsers
    "https://ok.example.com./app",
    "https://evil.net/ok.example.com/app",
    "https://evil.net?https://ok.example.com/app",
    "https://evil.net#https://ok.example.com/app",
    "https://ok.example.com@evil.net/app",
    "https://ok.example.com:443@evil.net/app",
    "https://user:pass@ok.example.com/app",
    "https://evil.net\\@ok.example.com/app",
    "https://ok.example.com\\@evil.net/app",
    "https:\\\\evil.net\\app",
    "https:/evil.net/app",
    "https:evil.net/app",
    "https://evil.net\\.ok.example.com/app",
    "http://ok.example.com/app",  # downgrade to plain http
    "https://ok.example.com:8443/app",
    "http://localhost:3001/",
    "http://localhost/",
    "https://ok.example.com/application",  # a prefix, not a path segment
    "https://ok.example.com/",
    "https://ok.example.com/app#@evil.net",
    "https://ok.example.com/app\n.evil.net",
    "https://ok.example.com/app\x00",
    "https://ok.example.com/app/" + "a" * 3000,
    # Shown to a person in the email: reordered, split or hidden text.
    "https://ok.example.com/app/\u202egnp.exe",  # RIGHT-TO-LEFT OVERRIDE
    "https://ok.example.com/app/\u2028evil",  # LINE SEPARATOR
    "https://ok.example.com/app/\u2029evil",  # PARAGRAPH SEPARATOR
    "https://ok.example.com/app/\u200bhidden",  # ZERO WIDTH SPACE
    "https://ok.example.com/app/\u2066isolate",  # LEFT-TO-RIGHT ISOLATE
    "https://ok.example.com/app/\u00a0nbsp",  # NO-BREAK SPACE
    # Blank-looking characters outside those categories (the address rule's set).
    "https://ok.example.com/app/\u3164blank",  # HANGUL FILLER
    "https://ok.example.com/app/\u2800blank",  # BRAILLE PATTERN BLANK
    "https://ok.example.com/app/\u034fjoin",  # COMBINING GRAPHEME JOINER
    "https://ok.example.com/app/\ufe0fselector",  # VARIATION SELECTOR-16
]

# Dot segments leave the allowed path once a browser resolves them: on a shared
# host (one tenant per path) the token would reach another tenant's page.
DOT_SEGMENTS = [
    pytest.param(url)
    for url in (
        "https://ok.example.com/app/../admin",
        "https://ok.example.com/app/..",
        "https://ok.example.com/app/%2e%2e/admin",
        "https://ok.example.com/app/%2E%2E/%2e%2e/evil",
        "https://ok.example.com/app/.%2e/admin",
        # Servlet containers drop ";params" before resolving dot segments.
        "https://ok.example.com/app/..;/admin",
        "https://ok.example.com/app/..;x=1/admin",
    )
]

# A dot segment, an empty segment or a backslash hidden under more than one
# layer of percent-encoding: a server (or proxy) that decodes once more than the
# browser did walks out of the allowed path.
ENCODED_TRICKS = [
    "https://ok.example.com/app/%252e%252e/admin",
    "https://ok.example.com/app/%252E%252e/%252e%252e/evil",
    "https://ok.example.com/app/.%252e/admin",
    "https://ok.example.com/app/%25252e%25252e/admin",
    "https://ok.example.com/app/%252e",
    "https://ok.example.com/app/%252e%252e;x/admin",
    "https://ok.example.com/app//evil.net/x",
    "https://ok.example.com/app/x//y",
    "https://ok.example.com/app/%2f/evil",
    "https://ok.example.com/app/%2fevil.net",
    "https://ok.example.com/app/%252f%252fevil.net",
    "https://ok.example.com/app/%5c..%5cadmin",
    "https://ok.example.com/app/%255c..%255cadmin",
    "https://ok.example.com/app/x%5cy",
]

FRIENDLY = [
    "https://ok.example.com/app",
    "https://ok.example.com/app/",
    "https://ok.example.com/app/welcome?step=2",
    "HTTPS://OK.Example.COM/app/welcome",  # scheme and host are case-insensitive
    "http://localhost:3000/",
    "http://localhost:3000/verified",
    # Percent-encoding that hides no dot segment, empty segment or backslash.
    "https://ok.example.com/app/a%20b",
    "https://ok.example.com/app/100%25",
    "https://ok.example.com/app/%7Euser/x.y",
    "https://ok.example.com/app/...",
    "https://ok.example.com/app/.well-known",
    "https://ok.example.com/app/welcome?next=//evil.net&dir=..%2F",
]


@pytest.mark.parametrize("url", [*HOSTILE, *DOT_SEGMENTS, *ENCODED_TRICKS])
def test_hostile_redirect_targets_are_refused(url: str) -> None:
    assert not is_allowed_redirect(url, ALLOWLIST)


@pytest.mark.parametrize("url", FRIENDLY)
def test_targets_inside_the_allowlist_are_accepted(url: str) -> None:
    assert is_allowed_redirect(url, ALLOWLIST)


@pytest.mark.parametrize("url", ENCODED_TRICKS[:2] + ENCODED_TRICKS[6:7] + ENCODED_TRICKS[12:13])
def test_the_api_answers_redirect_not_allowed_for_encoded_tricks(url: str, conn, client) -> None:
    _app, key = register_app(conn, "tenant", ["https://ok.example.com/app"])
    for path, body in (
        ("/api/v1/password-resets", {"email": "a@example.com", "redirect_url": url}),
        ("/api/v1/signups", {"email": "b@example.com", "password": "a fine passphrase 9",
                             "redirect_url": url}),
    ):
        reply = client.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
        assert_problem(reply, 400, "redirect_not_allowed")
    fine = {"email": "a@example.com", "redirect_url": "https://ok.example.com/app/a%20b"}
    reply = client.post("/api/v1/password-resets", json=fine,
                        headers={"Authorization": f"Bearer {key}"})
    assert reply.status_code == 202, reply.get_json()


def test_empty_allowlist_accepts_nothing() -> None:
    assert not is_allowed_redirect("https://ok.example.com/app", [])


def _browser_target(url: str) -> tuple[str, str, str]:
    """(scheme, host:port, decoded path) roughly as a WHATWG browser resolves an http(s) URL.

    Deliberately independent of urllib: tabs and newlines vanish, backslashes
    are slashes, any run of slashes after the scheme starts the authority,
    userinfo ends at the last '@', and %2e is a dot in path segments.
    """
    url = re.sub(r"[\t\n\r]", "", url.strip(" \x00-\x1f"))
    scheme, _, rest = url.partition(":")
    rest = rest.replace("\\", "/").lstrip("/")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    host = authority.rpartition("@")[2].lower().rstrip(".")
    path = rest[len(authority):]
    path = re.split(r"[?#]", path, maxsplit=1)[0]
    segments: list[str] = []
    for segment in path.split("/"):
        segment = unquote(segment).lower() if unquote(segment) in {".", ".."} else segment
        if segment == "..":
            segments = segments[:-1]
        elif segment != ".":
            segments.append(segment)
    return scheme.lower(), host, "/".join(segments)


def _inside_allowlist(url: str) -> bool:
    scheme, host, path = _browser_target(url)
    for allowed in ALLOWLIST:
        a_scheme, a_host, a_path = _browser_target(allowed)
        base = a_path.rstrip("/")
        if (scheme, host) == (a_scheme, a_host) and (path == base or path.startswith(base + "/")):
            return True
    return False




def _piece(friendly: str, hostile: list[str]) -> st.SearchStrategy[str]:
    """The friendly value half the time, so accepted URLs are common enough to check."""
    return st.one_of(st.just(friendly), st.sampled_from(hostile))


hostile_urls = st.builds(
    "".join,
    st.tuples(
        _piece("https", ["HTTPS", "http", "javascript", "https\t", " https"]),
        _piece("://", [":", ":/", ":///", ":\\\\", "://\\"]),
        _piece("", ["user@", "ok.example.com@", "evil.net@", "a:b@", "ok.example.com\\@"]),
        _piece("ok.example.com", ["OK.example.com", "evil.net", "ok.example.com.evil.net",
                                  "localhost", "ok.example.com.", "ok.example.com%2e"]),
        _piece("", [":3000", ":443", ":8443", ":0"]),
        st.sampled_from(["", "/", "/app", "/app/", "/App", "/apps", "\\app", "/app;x",
                         "/app/x/", "/app%2fx", "/app/%2fevil.net", "/app/..",
                         "/app/%2e%2e/x", "/app/./x", "/app/.%2E/evil"]),
        _piece("", ["/x", "?next=//evil.net", "#frag", "\\evil.net", "@evil.net", "%00"]),
    ),
)


@settings(max_examples=2000, deadline=None, database=None)
@given(hostile_urls)
def test_accepted_targets_resolve_inside_the_allowlist_in_a_browser(url: str) -> None:
    if is_allowed_redirect(url, ALLOWLIST):
        assert _inside_allowlist(url), f"accepted, but a browser would go to {_browser_target(url)}"
