"""What SPEC §16 adds to messages and pages: code and link states everywhere a message is
answered (the API and the live events), deleting a message or a scope (API, and the UI's
POST with a CSRF token), the event streams of a scope and of one message, the icon."""

from __future__ import annotations

import json
import re
import smtplib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.request import Request, urlopen

import pytest

from authsvc.accounts import actions
from tests.inbox_support import HttpClient, email, inbox_services, send, serving_inbox
from tests.inbox_ui_support import links_in_each_state, send_links_email
from tests.link_support import latest_link

STATES = ["used", "superseded", "would_redeem"]


def _one(inbox: HttpClient, scope: str) -> dict[str, Any]:
    answer = inbox.get(f"/_inbox/scopes/{scope}/expect-one?settle=0")
    assert answer.status_code == 200
    return dict(answer.json["message"])


def test_every_message_answer_carries_the_code_and_each_authsvc_links_state(
    inbox, sink, conn, svc
):
    links = links_in_each_state(conn, svc)
    send_links_email(sink.port, "fields", links)
    message = _one(inbox, "fields")
    assert message["code"] == "123456"
    assert [(s["url"], s["state"]) for s in message["link_states"]] == [
        (links[state], state) for state in STATES
    ]
    assert [s["purpose"] for s in message["link_states"]] == ["verify", "reset", "reset"]
    base = "/_inbox/scopes/fields/messages"
    listed = inbox.get(f"{base}?bodies=0").json["messages"]
    again = inbox.get(f"{base}/{message['id']}").json["message"]
    for answer in (listed[0], again):
        assert answer["code"] == "123456" and answer["link_states"] == message["link_states"]
    # Read, not used: the link still redeems, and the answer follows it once it is used.
    actions.reset_password(
        conn, svc, token=links["would_redeem"].split("token=")[1], password="a new passphrase!"
    )
    after = inbox.get(f"{base}/{message['id']}").json["message"]["link_states"]
    assert [s["state"] for s in after] == ["used", "superseded", "used"]


def test_links_elsewhere_have_no_state_and_text_without_a_code_has_none(inbox, sink):
    send(sink.port, email("plain@inbox.test", text="See https://other.example/x?token=1"))
    message = _one(inbox, "plain")
    assert message["links"] == ["https://other.example/x?token=1"]
    assert message["link_states"] == [] and message["code"] is None


def test_delete_one_message_leaves_the_rest(inbox, sink):
    for subject in ("keep", "drop"):
        send(sink.port, email("del@inbox.test", subject=subject))
    listed = inbox.get("/_inbox/scopes/del/messages").json["messages"]
    drop = next(m["id"] for m in listed if m["subject"] == "drop")
    assert inbox.delete(f"/_inbox/scopes/del/messages/{drop}").status_code == 204
    assert [m["subject"] for m in inbox.get("/_inbox/scopes/del/messages").json["messages"]] == [
        "keep"
    ]
    gone = inbox.delete(f"/_inbox/scopes/del/messages/{drop}")
    assert gone.status_code == 404 and gone.json["code"] == "not_found"
    assert inbox.delete(f"/_inbox/scopes/other/messages/{listed[0]['id']}").status_code == 404
    assert inbox.delete("/_inbox/scopes/a%20b/messages/1").status_code == 400


# -- the UI's delete forms ----------------------------------------------------


def _form(html: str, action_end: str) -> tuple[str, str]:
    action = re.search(rf'<form class="danger" method="post" action="([^"]*{action_end})"', html)
    token = re.search(r'name="csrf" value="([^"]+)"', html)
    assert action and token
    return action.group(1), token.group(1)


def _post(inbox: HttpClient, path: str, fields: str) -> Any:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    return inbox.open(path, "POST", body=fields.encode(), headers=headers)


def test_the_ui_deletes_a_message_and_a_scope_with_its_csrf_token(inbox, sink):
    for subject in ("first", "second"):
        send(sink.port, email("ui-del@inbox.test", subject=subject))
    ids = [m["id"] for m in inbox.get("/_inbox/scopes/ui-del/messages").json["messages"]]
    page = inbox.get(f"/_inbox/ui/scopes/ui-del/messages/{ids[0]}").get_data(as_text=True)
    action, token = _form(page, "/delete")
    assert _post(inbox, action, "csrf=forged").status_code == 403
    assert _post(inbox, action, "").status_code == 403
    # A token for another message deletes nothing here.
    other = inbox.get(f"/_inbox/ui/scopes/ui-del/messages/{ids[1]}").get_data(as_text=True)
    assert _post(inbox, action, f"csrf={_form(other, '/delete')[1]}").status_code == 403
    done = _post(inbox, action, f"csrf={token}")
    assert done.status_code == 303 and done.headers["Location"] == "/_inbox/ui/scopes/ui-del"
    assert len(inbox.get("/_inbox/scopes/ui-del/messages").json["messages"]) == 1

    scope_page = inbox.get("/_inbox/ui/scopes/ui-del").get_data(as_text=True)
    action, token = _form(scope_page, "/ui-del/delete")
    assert _post(inbox, action, f"csrf={token}x").status_code == 403
    done = _post(inbox, action, f"csrf={token}")
    assert done.status_code == 303 and done.headers["Location"] == "/_inbox/?deleted=ui-del"
    assert inbox.get("/_inbox/scopes/ui-del/messages").json["messages"] == []
    assert "Scope <code>ui-del</code> was deleted." in inbox.get(
        "/_inbox/?deleted=ui-del").get_data(as_text=True)


def test_a_get_or_head_of_a_delete_address_deletes_nothing(inbox, sink):
    """A link or an <img> elsewhere can make a browser GET any address: none deletes."""
    send(sink.port, email("kept@inbox.test", subject="still here"))
    [message] = inbox.get("/_inbox/scopes/kept/messages").json["messages"]
    assert inbox.open("/_inbox/scopes/kept/faults", "POST", {"Content-Type": "application/json"},
                      body=b'{"reply": "451 later", "count": 5}').status_code == 201
    one = f"/_inbox/scopes/kept/messages/{message['id']}"
    for method in ("GET", "HEAD"):
        for path in ("/_inbox/ui/scopes/kept/delete", f"/_inbox/ui{one[7:]}/delete",
                     "/_inbox/scopes/kept", "/_inbox/scopes/kept/faults"):
            answer = inbox.open(path, method)
            assert answer.status_code == 405, (method, path)
            assert "GET" not in answer.headers["Allow"], (method, path)
        assert inbox.open(one, method).status_code == 200  # a read, and only that
    assert [m["id"] for m in inbox.get("/_inbox/scopes/kept/messages").json["messages"]] == [
        message["id"]]
    with pytest.raises(smtplib.SMTPRecipientsRefused):  # the fault is still set
        send(sink.port, email("kept@inbox.test"))


def test_the_inbox_serves_its_own_icon(inbox):
    icon = inbox.get("/_inbox/favicon.svg")
    assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
    assert b"<svg" in icon.data
    assert 'rel="icon" href="/_inbox/favicon.svg"' in inbox.get("/_inbox/").get_data(as_text=True)


# -- the event streams --------------------------------------------------------


@contextmanager
def _stream(url: str, path: str) -> Iterator[Any]:
    with urlopen(Request(url + path), timeout=20) as stream:  # noqa: S310
        assert stream.headers["Content-Type"] == "text/event-stream"

        def next_event() -> tuple[str, Any]:
            name, data = None, None
            while True:
                line = stream.readline().decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "" and name is not None:
                    return name, data

        yield next_event


def test_a_scopes_stream_pushes_its_messages_with_codes_and_states(inbox, sink, conn, svc):
    with _stream(inbox.url, "/_inbox/events?scope=live1&subject=links") as next_event:
        assert next_event() == ("messages", {
            "scope": "live1", "messages": [], "more": False, "duplicates": []})
        send(sink.port, email("live1@inbox.test", subject="not this one"))
        send_links_email(sink.port, "live1", links_in_each_state(conn, svc))
        name, data = next_event()
        while not data["messages"]:  # the filtered-out message may come first: no change
            name, data = next_event()
        [message] = data["messages"]
        assert name == "messages" and message["subject"] == "Your links"
        assert message["code"] == "123456"
        assert [s["state"] for s in message["link_states"]] == STATES


def test_a_message_stream_follows_its_link_states_and_its_deletion(inbox, sink, conn, svc):
    address = "ann@example.com"
    links = links_in_each_state(conn, svc)
    send_links_email(sink.port, "live2", {"would_redeem": links["would_redeem"]})
    message_id = _one(inbox, "live2")["id"]
    with _stream(inbox.url, f"/_inbox/events?scope=live2&message={message_id}") as next_event:
        name, data = next_event()
        assert name == "message" and data["message"]["link_states"][0]["state"] == "would_redeem"
        actions.request_password_reset(conn, svc, email=address)  # supersedes it: no mail lands
        assert latest_link(conn, svc, address, "reset") not in links["would_redeem"]
        _, data = next_event()  # read again within LINK_RECHECK_SECONDS
        assert data["message"]["link_states"][0]["state"] == "superseded"
        assert inbox.delete(f"/_inbox/scopes/live2/messages/{message_id}").status_code == 204
        assert next_event() == ("message", {"message": None})


def test_stopping_the_inbox_ends_an_open_stream_cleanly(sink, env, pool, passwords):
    """A server stopped under an open page (Ctrl-C on `authsvc inbox`) ends its event
    stream with the last chunk, which EventSource takes as a cue to reconnect, rather
    than leaving it to be cut off mid-stream when the shutdown's grace runs out."""
    svc = inbox_services(env, pool, passwords)
    with serving_inbox(sink, svc, listen_url=env["AUTHSVC_DIRECT_DATABASE_URL"]) as url:
        stream = urlopen(Request(url + "/_inbox/events?scope=stop"), timeout=20)  # noqa: S310
        first = [stream.readline() for _ in range(5)]
        assert first[2] == b"event: messages\n" and first[3].startswith(b"data: "), first
        assert first[4] == b"\n", first
    with stream:
        assert stream.read() == b""  # raises IncompleteRead when the stream was cut off


def test_a_bad_stream_query_is_a_400_before_any_stream(inbox):
    for query in ("scope=a%20b", "message=1", "scope=x&message=y", "scope=x&q=%00"):
        answer = inbox.get(f"/_inbox/events?{query}")
        assert answer.status_code == 400 and answer.json["code"] == "invalid_request", query


def test_the_streams_need_the_token_when_one_is_set(sink, env, pool, passwords):
    svc = inbox_services({**env, "AUTHSVC_TEST_INBOX_TOKEN": "s3cret"}, pool, passwords)
    with serving_inbox(sink, svc, listen_url=None) as url:
        assert HttpClient(url).get("/_inbox/events?scope=x").status_code == 401
        assert HttpClient(url).open("/_inbox/ui/scopes/x/delete", "POST").status_code == 401
        assert HttpClient(url).delete("/_inbox/scopes/x/messages/1").status_code == 401
