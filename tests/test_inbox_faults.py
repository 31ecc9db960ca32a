"""Faults on demand (SPEC §16): the sink refuses a scope's next deliveries with a chosen reply.

The end-to-end tests run a real outbox worker (in a thread) against the real
sink: a refused first attempt is retried into exactly one email, and a
permanent refusal ends `failed` with an `email.failed` event for the app.
"""

from __future__ import annotations

import json
import smtplib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.request import Request, urlopen

import psycopg
import pytest

from authsvc.cli.dev import DEV_RETRY_SECONDS
from authsvc.config import Settings
from authsvc.testing import InboxError, ScopedInbox
from authsvc.worker.delivery import RetryPolicy
from authsvc.worker.event_delivery import WebhookDelivery
from authsvc.worker.loop import Worker, WorkerOptions
from testkit.waiting import wait_until
from tests.api_support import ApiCaller
from tests.inbox_support import HttpClient, email, inbox_services, send, serving_inbox
from tests.test_dev import _printed_key, running_dev
from tests.webhook_support import register_webhook_app, serving
from tests.worker_support import renderer, running, smtp_factory

PASSWORD = "correct horse battery staple"
FAST_RETRY = RetryPolicy(max_attempts=5, base_seconds=0.05, cap_seconds=0.2)


def _fault(inbox: HttpClient, scope: str, body: object) -> object:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return inbox.open(f"/_inbox/scopes/{scope}/faults", "POST", body=data,
                      headers={"Content-Type": "application/json"})


def _refusal(port: int, to: str) -> tuple[int, bytes] | None:
    """The sink's answer to RCPT for `to` when it refuses; None when the message is stored."""
    try:
        send(port, email(to))
    except smtplib.SMTPRecipientsRefused as refused:
        return refused.recipients[to]
    return None


def test_the_next_n_deliveries_get_the_reply_then_mail_is_stored_again(inbox, sink):
    answer = _fault(inbox, "flaky", {"reply": "451 4.3.0 Try again later", "count": 2})
    assert answer.status_code == 201  # type: ignore[attr-defined]
    assert answer.json == {  # type: ignore[attr-defined]
        "scope": "flaky", "reply": "451 4.3.0 Try again later", "count": 2,
    }
    for _ in range(2):
        assert _refusal(sink.port, "a+flaky@inbox.test") == (451, b"4.3.0 Try again later")
    assert _refusal(sink.port, "a+other@inbox.test") is None  # other scopes are untouched
    assert _refusal(sink.port, "a+flaky@inbox.test") is None
    listed = inbox.get("/_inbox/scopes/flaky/messages").json["messages"]
    assert len(listed) == 1  # only the delivery after the faults


def test_delete_clears_the_faults_and_a_new_fault_replaces_the_old(inbox, sink):
    _fault(inbox, "moody", {"reply": "550 5.1.1 No such user", "count": 5})
    _fault(inbox, "moody", {"reply": "452 4.2.2 Mailbox full", "count": 1})
    assert _refusal(sink.port, "moody@inbox.test") == (452, b"4.2.2 Mailbox full")
    assert _refusal(sink.port, "moody@inbox.test") is None
    _fault(inbox, "moody", {"reply": "554 5.7.1 Refused", "count": 3})
    assert inbox.delete("/_inbox/scopes/moody/faults").status_code == 204
    assert _refusal(sink.port, "moody@inbox.test") is None


@pytest.mark.parametrize(
    ("body", "names"),
    [
        (b"", "JSON object"),
        (b"{not json", "JSON object"),
        (b'["451 x"]', "JSON object"),
        (b"[" * 100_000, "JSON object"),  # nested past the parser's recursion limit
        (b'{"reply": "451 x", "count": ' + b"[" * 100_000, "JSON object"),
        ({"reply": "451 x", "count": 1, "when": "now"}, "unknown field 'when'"),
        ({"count": 1}, "reply"),
        ({"reply": 451}, "reply"),
        ({"reply": "250 OK"}, "reply"),  # not a refusal
        ({"reply": "45 short"}, "reply"),
        ({"reply": "4510 four digits"}, "reply"),
        ({"reply": "451 4.3.0 later\r\n250 smuggled"}, "reply"),  # a second reply line
        ({"reply": "451 later\n"}, "reply"),
        ({"reply": "451 tab\there"}, "reply"),
        ({"reply": "451 non-ascii ü"}, "reply"),
        ({"reply": "451 " + "x" * 201}, "reply"),
        ({"reply": "451 x", "count": 0}, "count"),
        ({"reply": "451 x", "count": 101}, "count"),
        ({"reply": "451 x", "count": "2"}, "count"),
        ({"reply": "451 x", "count": True}, "count"),
        ({"reply": "451 x", "count": 1.5}, "count"),
    ],
)
def test_a_bad_fault_is_a_400_problem_naming_what_is_wrong(inbox, sink, body, names):
    answer = _fault(inbox, "strict", body)
    assert answer.status_code == 400  # type: ignore[attr-defined]
    assert answer.mimetype == "application/problem+json"  # type: ignore[attr-defined]
    assert answer.json["code"] == "invalid_request"  # type: ignore[attr-defined]
    assert names in answer.json["detail"]  # type: ignore[attr-defined]
    assert _refusal(sink.port, "strict@inbox.test") is None  # nothing was set


def test_the_longest_reply_is_accepted_as_is(inbox, sink):
    reply = "554 " + "y" * 200
    assert _fault(inbox, "long", {"reply": reply}).status_code == 201  # type: ignore[attr-defined]
    assert _refusal(sink.port, "long@inbox.test") == (554, b"y" * 200)


def test_faults_need_the_token_and_a_good_scope(sink, env, pool, passwords):
    svc = inbox_services({**env, "AUTHSVC_TEST_INBOX_TOKEN": "s3cret"}, pool, passwords)
    with serving_inbox(sink, svc, listen_url=None) as url:
        body = json.dumps({"reply": "451 later"}).encode()
        as_json = {"Content-Type": "application/json"}
        anonymous = HttpClient(url)
        assert anonymous.open("/_inbox/scopes/x/faults", "POST", as_json,
                              body=body).status_code == 401
        assert anonymous.delete("/_inbox/scopes/x/faults").status_code == 401
        client = HttpClient(url, token="s3cret")
        bad = client.open("/_inbox/scopes/a%20b/faults", "POST", as_json, body=body)
        assert bad.status_code == 400 and bad.json["code"] == "invalid_request"
        assert client.open("/_inbox/scopes/x/faults", "POST", as_json,
                           body=body).status_code == 201


@pytest.mark.parametrize("content_type", [
    None, "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x", "application/jsonx",
])
def test_a_fault_body_not_sent_as_json_is_refused_415_and_sets_nothing(
    inbox, sink, content_type
):
    """Without an inbox token (the development default) any web page a tester opens could
    otherwise set a fault: a browser posts text/plain or a form to any address without
    asking first, and only a declared JSON body needs a CORS preflight this server never
    grants."""
    body = json.dumps({"reply": "550 5.7.1 refused", "count": 100}).encode()
    headers = {} if content_type is None else {"Content-Type": content_type}
    answer = inbox.open("/_inbox/scopes/victim/faults", "POST", headers, body=body)
    assert answer.status_code == 415
    assert answer.mimetype == "application/problem+json"
    assert answer.json["code"] == "unsupported_media_type"
    assert "Content-Type: application/json" in answer.json["detail"]
    assert _refusal(sink.port, "victim@inbox.test") is None  # nothing was set


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8",
                                          "Application/JSON", "application/problem+json"])
def test_json_by_any_spelling_sets_the_fault(inbox, sink, content_type):
    body = json.dumps({"reply": "451 later"}).encode()
    answer = inbox.open("/_inbox/scopes/spelt/faults", "POST", {"Content-Type": content_type},
                        body=body)
    assert answer.status_code == 201
    assert _refusal(sink.port, "spelt@inbox.test") == (451, b"later")


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/_inbox/scopes/victim/faults"), ("DELETE", "/_inbox/scopes/victim/faults"),
    ("DELETE", "/_inbox/scopes/victim"), ("DELETE", "/_inbox/scopes/victim/messages/1"),
    ("POST", "/_inbox/scopes"),
])
def test_no_other_site_is_allowed_a_json_post_or_a_delete(inbox, method, path):
    """What a page elsewhere can send without asking is a form or text/plain (refused above);
    a DELETE or a JSON body needs a preflight, and the inbox grants none."""
    answer = inbox.open(path, "OPTIONS", {
        "Origin": "https://evil.example", "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "content-type",
    })
    assert not [h for h in answer.headers if h.lower().startswith("access-control-allow")]


# -- end to end, through a real worker ---------------------------------------


@contextmanager
def _worker(database_url: str, settings: Settings, smtp_port: int) -> Iterator[Worker]:
    """An outbox worker sending to the sink, retrying fast, delivering webhooks for real."""
    options = WorkerOptions(concurrency=2, batch=10, lease_seconds=10, poll_seconds=0.1,
                            retry=FAST_RETRY)
    webhooks = WebhookDelivery(settings.secret_keys, FAST_RETRY, options.send_timeout, False)
    worker = Worker(database_url, renderer(settings), smtp_factory(f"smtp://127.0.0.1:{smtp_port}"),
                    options, listen_url=settings.direct_database_url, webhooks=webhooks)
    with running(worker):
        yield worker


def _job(conn: psycopg.Connection, address: str) -> tuple[str, int]:
    row = conn.execute(
        "SELECT status, attempt_count FROM email_jobs WHERE kind = 'email' AND recipient = %s",
        (address,),
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def test_a_refused_first_attempt_is_retried_into_exactly_one_email(
    inbox, sink, api: ApiCaller, conn, database_url, settings
):
    scoped = ScopedInbox(inbox.url)
    scoped.fault("451 4.3.0 Try again later", count=1)
    address = scoped.address("alice")
    assert api.post("/signups", {"email": address, "password": PASSWORD}).status_code == 202
    with _worker(database_url, settings, sink.port):
        email_ = scoped.expect_one(timeout=20, settle=0.5)
        assert email_.to == [address]
        assert [s.state for s in email_.link_states] == ["would_redeem"]
        assert _job(conn, address) == ("sent", 2)  # refused once, then delivered once


def test_a_permanent_refusal_ends_failed_with_an_email_failed_event(
    inbox, sink, client, conn, database_url, settings
):
    scoped = ScopedInbox(inbox.url)
    scoped.fault("550 5.1.1 No such user here", count=1)
    address = scoped.address("bob")
    with serving() as receiver:
        app, key, _secret = register_webhook_app(conn, settings, receiver.url)
        api = ApiCaller(client, app, key)
        assert api.post("/signups", {"email": address, "password": PASSWORD}).status_code == 202
        with _worker(database_url, settings, sink.port):
            wait_until(lambda: receiver.of_type("email.failed"), timeout=20,
                       what="the email.failed event")
        [failed] = receiver.of_type("email.failed")
        data = json.loads(failed.body)["data"]
        assert data["reason"] == "rejected" and data["email"]["to"] == address
        assert not receiver.of_type("email.delivered")
    assert _job(conn, address) == ("failed", 1)  # refused for good: never retried
    with pytest.raises(InboxError, match="no email arrived"):
        scoped.expect_one(timeout=0, settle=0)


@pytest.mark.e2e
def test_the_documented_example_against_authsvc_dev_and_its_own_worker(tmp_path, env, conn):
    """docs/inbox.md's first fault example as a QA team runs it: `authsvc dev`, whose worker
    sends the refused verification email again after DEV_RETRY_SECONDS, within the
    example's expect_one(timeout=20) and exactly once."""
    with running_dev(tmp_path, {**env, "AUTHSVC_DATA_DIR": str(tmp_path / ".authsvc")}) as dev:
        scoped = ScopedInbox(dev.url)
        scoped.fault("451 4.3.0 Try again later")  # the first delivery is refused
        address = scoped.address("alice")
        began = time.monotonic()
        _sign_up(dev.url, _printed_key(dev), address)
        email_ = scoped.expect_one(timeout=20)  # the retry: one email, no more (1 s settle)
        took = time.monotonic() - began
        assert [link.state for link in email_.link_states] == ["would_redeem"]
        assert email_.to == [address]
        assert _job(conn, address) == ("sent", 2)  # refused once, then delivered once
        assert DEV_RETRY_SECONDS <= took < 20, took


def _sign_up(url: str, key: str, address: str) -> None:
    request = Request(f"{url}/api/v1/signups", method="POST",  # noqa: S310 - loopback
                      data=json.dumps({"email": address, "password": PASSWORD}).encode(),
                      headers={"Authorization": f"Bearer {key}",
                               "Content-Type": "application/json"})
    with urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
        assert answer.status == 202
