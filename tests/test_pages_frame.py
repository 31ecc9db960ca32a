"""What every page's frame tells a person: who is logged in, how long to wait, the site's icon."""

from __future__ import annotations

import re

import pytest

from tests.inbox_support import HttpClient, running_sink, serve_front
from tests.pages_support import csrf_token, make_account, sign_in, submit, text_of

_ICON = re.compile(r'<link rel="icon" href="([^"]+)"')


def _nav(response) -> str:
    """The header's navigation links, as a person reads them."""
    html = response.get_data(as_text=True)
    match = re.search(r'<nav aria-label="Account">(.*?)</nav>', html, re.S)
    assert match, "the page has no account navigation"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_an_error_page_shows_a_logged_in_person_their_account_links(client, conn, svc):
    sign_in(client, make_account(conn, svc))
    missing = client.get("/no-such-page")
    assert missing.status_code == 404
    assert _nav(missing) == "Account Log out"
    wrong_method = client.delete("/login")
    assert wrong_method.status_code == 405
    assert _nav(wrong_method) == "Account Log out"
    expired_form = client.post("/account/password", data={"current": "x", "new": "y"})
    assert expired_form.status_code == 400
    assert _nav(expired_form) == "Account Log out"


def test_an_error_page_offers_log_in_to_everyone_else(client, conn, svc):
    assert _nav(client.get("/no-such-page")) == "Log in Sign up"
    sign_in(client, make_account(conn, svc))
    submit(client, "/logout", {})
    assert _nav(client.get("/no-such-page")) == "Log in Sign up"


_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def _said_wait(text: str) -> int:
    """The seconds a 'Wait about …' sentence names; each count agrees with its unit."""
    match = re.search(r"Wait about (.+?), then try again\.", text)
    assert match, text
    total = 0
    for part in match.group(1).split(" and "):
        count, unit = part.split(" ")
        assert unit == ("{}" if count == "1" else "{}s").format(unit.rstrip("s")), part
        total += int(count) * _UNIT_SECONDS[unit.rstrip("s")]
    return total


@pytest.mark.parametrize(("limit", "wait"), [("2/15m", None), ("2/1m", "1 minute"),
                                             ("2/3h", None)])
def test_the_too_many_attempts_page_says_how_long_in_words(app_with, conn, svc, limit, wait):
    client = app_with(AUTHSVC_RATE_LIMIT_IP=limit).test_client()
    sign_in(client, make_account(conn, svc))  # the first post
    token = csrf_token(client, "/reset")
    sent = client.post("/reset", data={"csrf_token": token, "email": "a@example.com"})
    assert sent.status_code == 303
    limited = client.post("/reset", data={"csrf_token": token, "email": "a@example.com"})
    assert limited.status_code == 429
    shown = text_of(limited)
    assert "(s)" not in shown
    if wait:
        assert f"Wait about {wait}, then try again." in shown
    # Whole minutes, rounded up from Retry-After: never less than the header says.
    retry_after = int(limited.headers["Retry-After"])
    assert _said_wait(shown) == -(-retry_after // 60) * 60
    assert _nav(limited) == "Account Log out"


def _icon_of(client, path: str) -> str:
    match = _ICON.search(client.get(path).get_data(as_text=True))
    assert match, f"{path} links no icon"
    return match.group(1)


def test_every_page_links_an_icon_that_is_served_and_cached(client, conn, svc):
    paths = ["/login", "/signup", "/reset", "/no-such-page"]
    icons = {_icon_of(client, path) for path in paths}
    sign_in(client, make_account(conn, svc))
    icons |= {_icon_of(client, "/account"), _icon_of(client, "/no-such-page")}
    [icon] = icons
    served = client.get(icon)
    assert served.status_code == 200
    assert served.mimetype == "image/svg+xml"
    assert served.get_data().lstrip().startswith(b"<svg")
    assert "max-age=2592000" in served.headers["Cache-Control"]
    # Browsers that ask for the conventional address get it too.
    assert client.get("/favicon.ico").status_code == 200


def test_the_inbox_ui_links_the_same_icon(env, pool, clock, passwords, client):
    # As `authsvc dev` serves them: the inbox's server before the app, one origin.
    with running_sink(pool) as sink:
        for url in serve_front(sink, env, pool, passwords, clock):
            inbox = HttpClient(url)
            # The inbox serves the same file itself, so it has one without the web app too.
            icon = _icon_of(inbox, "/_inbox/")
            assert icon == "/_inbox/favicon.svg"
            served = inbox.get(icon)
            assert served.status_code == 200 and served.mimetype == "image/svg+xml"
            assert served.data == client.get(_icon_of(client, "/login")).get_data()
            # The UI's own policy lets the page load it.
            policy = inbox.get("/_inbox/").headers["Content-Security-Policy"]
            assert "img-src 'self'" in policy
