"""Nothing a sender writes becomes markup in the inbox's pages or its live updates.

One email carries markup in the From display name, the To (display name and
envelope address), a header's name and value, the subject and a link (its URL
and its text); every page that shows any of it shows it as text, and the event
streams carry it as JSON strings that live.js writes with textContent (the
browser test in tests/test_browser_inbox_live.py watches that happen).
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote
from urllib.request import Request, urlopen

from markupsafe import escape

from tests.inbox_markup_support import (
    ENVELOPE_TO,
    FROM_NAME,
    HEADER_NAME,
    HEADER_VALUE,
    LINK,
    LINK_TEXT,
    SCOPE,
    SUBJECT,
    TO_NAME,
    send_hostile,
)
from tests.inbox_support import HttpClient

OWN_SCRIPT = '<script src="/_inbox/static/live.js" defer>'


def _page(inbox: HttpClient, path: str, *shown: str) -> str:
    """The page at `path`, which must show each of `shown` as escaped text, and run or load
    nothing but the inbox's own script."""
    answer = inbox.get(path)
    assert answer.status_code == 200, path
    html = answer.get_data(as_text=True)
    assert set(re.findall(r"<script[^>]*>", html, re.IGNORECASE)) <= {OWN_SCRIPT}, path
    assert not re.search(r"<(img|iframe(?! class=\"email\"))\b", html, re.IGNORECASE), path
    for text in shown:
        assert str(escape(text)) in html, (path, text)
    return html


def _events(url: str, path: str) -> tuple[str, object]:
    """The first event of a stream, read as the browser's EventSource frames it."""
    with urlopen(Request(url + path), timeout=20) as stream:  # noqa: S310 - loopback
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert stream.headers["X-Content-Type-Options"] == "nosniff"
        assert stream.readline() == b"retry: 2000\n" and stream.readline() == b"\n"
        name = stream.readline().decode()
        data = stream.readline().decode()
        assert stream.readline() == b"\n"  # one data line: nothing the sender wrote split it
    assert name.startswith("event: ") and data.startswith("data: ")
    return name[7:].rstrip("\n"), json.loads(data[6:])


def test_every_field_a_sender_writes_is_text_on_every_page(inbox, sink):
    send_hostile(sink.port)
    found = inbox.get(f"/_inbox/scopes/{SCOPE}/expect-one?settle=0").json["message"]
    assert found["to"] == [ENVELOPE_TO] and found["subject"] == SUBJECT  # stored as sent
    assert found["links"] == [LINK]

    message = _page(inbox, f"/_inbox/ui/scopes/{SCOPE}/messages/{found['id']}",
                    FROM_NAME, TO_NAME, ENVELOPE_TO, HEADER_NAME.lower(), HEADER_VALUE, SUBJECT,
                    LINK)
    assert f"<title>{escape(SUBJECT)} ·" in message
    assert str(escape(LINK_TEXT)) not in message  # the link's text is only in the framed HTML
    framed = inbox.get(f"/_inbox/ui/scopes/{SCOPE}/messages/{found['id']}/html")
    policy = framed.headers["Content-Security-Policy"]
    assert policy.startswith("sandbox allow-same-origin;") and "script-src" not in policy
    assert "default-src 'none'" in policy  # so the onerror above never runs, framed or not

    _page(inbox, f"/_inbox/ui/scopes/{SCOPE}", SUBJECT, ENVELOPE_TO)
    _page(inbox, "/_inbox/", SUBJECT)
    # The results show the scope, when, the envelope recipients, the subject and the code;
    # not the sender, so a from: search is checked by what it finds.
    for query in ("to:onerror", f'from:"{FROM_NAME}"', f'subject:"{SUBJECT[:20]}"'):
        results = _page(inbox, "/_inbox/ui/search?q=" + quote(query), ENVELOPE_TO, SUBJECT)
        assert "1 message matching" in results


def test_every_live_update_carries_the_fields_as_json_strings(inbox, sink):
    send_hostile(sink.port)
    found = inbox.get(f"/_inbox/scopes/{SCOPE}/expect-one?settle=0").json["message"]

    name, scopes = _events(inbox.url, "/_inbox/events")
    assert name == "scopes"
    assert [s["last_subject"] for s in scopes["scopes"]] == [SUBJECT]  # type: ignore[index]

    name, listing = _events(inbox.url, f"/_inbox/events?scope={SCOPE}")
    [listed] = listing["messages"]  # type: ignore[index]
    assert name == "messages"
    assert (listed["to"], listed["subject"], listed["from"]) == (
        [ENVELOPE_TO], SUBJECT, f'"{FROM_NAME}" <eve@evil.example>')

    name, one = _events(inbox.url, f"/_inbox/events?scope={SCOPE}&message={found['id']}")
    assert name == "message"
    shown = one["message"]  # type: ignore[index]
    assert shown["headers"][HEADER_NAME.lower()] == [HEADER_VALUE]
    assert shown["headers"]["to"] == [f'"{TO_NAME}" <{ENVELOPE_TO}>']
    assert shown["links"] == [LINK]
