"""App events (SPEC §9): queued with their cause, delivered through the outbox, signed.

A real receiver (an HTTP server in the test) checks every delivery with the
`standardwebhooks` reference verifier.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import time
from typing import Any

import psycopg
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from authsvc.accounts import actions
from authsvc.app_events.targets import (
    WebhookTargetRefused,
    is_public_address,
    validate_webhook_url,
)
from authsvc.apps.keys import revoke_app
from authsvc.worker import jobs
from authsvc.worker.event_delivery import WebhookDelivery
from authsvc.worker.jobs import Outcome
from testkit.waiting import free_port, wait_until
from tests.api_support import ApiCaller
from tests.link_support import latest_link
from tests.webhook_support import (
    FAST_RETRY,
    register_webhook_app,
    serving,
    webhook_worker,
)
from tests.worker_support import running

PASSWORD = "correct horse battery"
NEW_PASSWORD = "another horse staple"
EMAIL = "ada@example.com"


def _webhook_jobs(conn: psycopg.Connection) -> list[tuple[int, str, str, int]]:
    """(id, event type, status, attempt_count) of every webhook job, oldest first."""
    return conn.execute(
        "SELECT id, template, status, attempt_count FROM email_jobs WHERE kind = 'webhook'"
        " ORDER BY id"
    ).fetchall()


def _trail(conn: psycopg.Connection, job_id: int) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT event FROM email_job_events WHERE job_id = %s ORDER BY id", (job_id,)
        )
    ]


def _sign_up_and_verify(api: ApiCaller, conn: psycopg.Connection, svc) -> None:
    assert api.post("/signups", {"email": EMAIL, "password": PASSWORD}).status_code == 202
    token = latest_link(conn, svc, EMAIL, "verify")
    assert api.post("/verifications/confirm", {"token": token}).status_code == 200


def test_verified_and_password_changed_arrive_signed_and_verify(
    conn, client, svc, settings, clock, database_url
):
    with serving() as receiver, running(webhook_worker(database_url, settings, clock)):
        app, key, secret = register_webhook_app(conn, settings, receiver.url)
        api = ApiCaller(client, app, key)

        def delivered(count: int) -> None:
            wait_until(lambda: len(receiver.of_type("email.delivered")) == count,
                       what=f"{count} email.delivered")

        assert api.post("/signups", {"email": EMAIL, "password": PASSWORD}).status_code == 202
        delivered(1)  # the verification email went out
        token = latest_link(conn, svc, EMAIL, "verify")
        assert api.post("/verifications/confirm", {"token": token}).status_code == 200
        # A reset request reports no outcome (that would say the account exists).
        assert api.post("/password-resets", {"email": EMAIL}).status_code == 202
        token = latest_link(conn, svc, EMAIL, "reset")
        reply = api.post("/password-resets/confirm", {"token": token, "password": NEW_PASSWORD})
        assert reply.status_code == 200
        delivered(2)  # the password-changed notice
        wait_until(
            lambda: receiver.of_type("user.verified") and receiver.of_type("user.password_changed"),
            what="the user events",
        )
    verifier = Webhook(secret)
    user_id = conn.execute("SELECT id FROM users WHERE email = %s", (EMAIL,)).fetchone()[0]
    for event_type in ("user.verified", "user.password_changed"):
        [delivery] = receiver.of_type(event_type)
        event = verifier.verify(delivery.body, delivery.headers)
        assert event["type"] == event_type
        assert event["data"] == {"user": {"id": str(user_id), "email": EMAIL}}
        assert event["timestamp"].endswith("Z")
        assert delivery.headers["webhook-id"].startswith("evt_")
        assert delivery.headers["content-type"] == "application/json"
        assert delivery.path == "/hooks/authsvc"
    flows = sorted(
        verifier.verify(d.body, d.headers)["data"]["email"]["flow"]
        for d in receiver.of_type("email.delivered")
    )
    # The verification email and the password-changed notice.
    assert flows == ["password_reset", "verification"]
    # Another secret does not verify: the signature is really the app's.
    other = Webhook("whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=")
    [delivery] = receiver.of_type("user.verified")
    with pytest.raises(WebhookVerificationError):
        other.verify(delivery.body, delivery.headers)
    # Each delivery is an outbox job with its trail, finished as sent.
    assert {row[2] for row in _webhook_jobs(conn)} == {"sent"}
    assert _trail(conn, _webhook_jobs(conn)[0][0]) == ["claimed", "sent"]


def test_a_receiver_answering_500_twice_gets_the_same_webhook_id_a_third_time(
    conn, client, svc, settings, clock, database_url
):
    with serving(statuses=[500, 500]) as receiver:
        app, key, secret = register_webhook_app(conn, settings, receiver.url)
        # An app with a webhook but no email events to muddle the count: confirm
        # through the account functions, the API's signup queued the flow.
        api = ApiCaller(client, app, key)
        _sign_up_and_verify(api, conn, svc)
        conn.execute("DELETE FROM email_jobs WHERE kind = 'email'")
        with running(webhook_worker(database_url, settings, clock)):
            wait_until(lambda: len(receiver.requests) >= 3, what="a third delivery attempt")
            [(job_id, _type, _status, _attempts)] = _webhook_jobs(conn)
            wait_until(lambda: _webhook_jobs(conn)[0][2] == "sent", what="the job sent")
    assert len(receiver.requests) == 3
    ids = {r.headers["webhook-id"] for r in receiver.requests}
    bodies = {r.body for r in receiver.requests}
    assert len(ids) == 1 and len(bodies) == 1
    for delivery in receiver.requests:  # every attempt is signed afresh, and verifies
        Webhook(secret).verify(delivery.body, delivery.headers)
    assert _trail(conn, job_id) == ["claimed", "retry", "claimed", "retry", "claimed", "sent"]
    errors = [
        r[0]
        for r in conn.execute(
            "SELECT error FROM email_job_events WHERE job_id = %s AND event = 'retry'", (job_id,)
        )
    ]
    assert errors == ["receiver answered HTTP 500"] * 2
    assert _webhook_jobs(conn)[0][3] == 3  # attempt_count, incremented at each claim


def test_a_receiver_down_for_the_whole_test_leaves_the_job_retrying(
    conn, client, svc, settings, clock, database_url
):
    down = f"http://127.0.0.1:{free_port()}/hooks"  # nothing listens there
    app, key, _secret = register_webhook_app(conn, settings, down)
    _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
    conn.execute("DELETE FROM email_jobs WHERE kind = 'email'")
    with running(webhook_worker(database_url, settings, clock)):
        job_id = _webhook_jobs(conn)[0][0]
        wait_until(lambda: _trail(conn, job_id).count("retry") >= 4, what="four failed attempts")
    [(job_id, event_type, status, attempts)] = _webhook_jobs(conn)
    assert (event_type, status) == ("user.verified", "pending")
    # Counted at claim; a claim the stop handed back unsent is given back.
    assert attempts >= 4
    row = conn.execute(
        "SELECT last_error, lease_owner FROM email_jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row[0].startswith("unreachable: 127.0.0.1") and row[1] is None
    trail = _trail(conn, job_id)
    assert trail.count("retry") >= 4 and set(trail) <= {"claimed", "retry", "released"}


def test_events_commit_with_their_cause_and_only_for_the_app_that_started_the_flow(
    conn, client, svc, settings
):
    with serving() as receiver:
        app, key, _secret = register_webhook_app(conn, settings, receiver.url)
        other, other_key, _ = register_webhook_app(conn, settings, receiver.url, "other")
        api = ApiCaller(client, app, key)
        assert api.post("/signups", {"email": EMAIL, "password": PASSWORD}).status_code == 202
        token = latest_link(conn, svc, EMAIL, "verify")
        # A redemption rolled back (the request failed later) queues nothing.
        with pytest.raises(RuntimeError), conn.transaction():
            actions.confirm_verification(conn, svc, token=token)
            assert len(_webhook_jobs(conn)) == 1
            raise RuntimeError("the caller's transaction fails")
        assert _webhook_jobs(conn) == []
        # Confirmed outside the API (the web page's path): the app that sent
        # the link still hears of it, the other app does not.
        actions.confirm_verification(conn, svc, token=token)
        rows = conn.execute(
            "SELECT template, app_id FROM email_jobs WHERE kind = 'webhook'"
        ).fetchall()
        assert rows == [("user.verified", app.id)]
        assert other.id != app.id and other_key != key
        # A flow started on the web pages (no app) tells nobody.
        actions.sign_up(conn, svc, email="web@example.com", password=PASSWORD)
        token = latest_link(conn, svc, "web@example.com", "verify")
        actions.confirm_verification(conn, svc, token=token)
        assert len(_webhook_jobs(conn)) == 1


def test_an_email_outcome_and_its_event_are_one_statement(conn, client, settings, svc):
    """No crash window: the outcome and its event commit together; a lost lease queues none."""
    with serving() as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url)
        api = ApiCaller(client, app, key)
        for n in range(3):
            body = {"email": f"u{n}@example.com", "password": PASSWORD}
            assert api.post("/signups", body).status_code == 202
    claimed = jobs.claim_batch(conn, "w1", 10, 30)
    assert [job.kind for job in claimed] == ["email"] * 3
    lost = claimed[2]
    conn.execute("UPDATE email_jobs SET lease_owner = 'w2' WHERE id = %s", (lost.id,))
    recorded = jobs.record_outcomes(
        conn,
        [
            Outcome(claimed[0], "sent", provider_message_id="<m0>"),
            Outcome(claimed[1], "failed", error="550 mailbox unavailable"),
            Outcome(lost, "sent", provider_message_id="<m2>"),
        ],
    )
    assert recorded == [True, True, False]
    rows = conn.execute(
        "SELECT template, payload FROM email_jobs WHERE kind = 'webhook' ORDER BY id"
    ).fetchall()
    assert [r[0] for r in rows] == ["email.delivered", "email.failed"]
    delivered, failed = (r[1] for r in rows)
    assert delivered["event"]["data"] == {
        "email": {"id": str(claimed[0].public_id), "to": "u0@example.com", "flow": "verification"}
    }
    # The SMTP server's words stay in the outbox; the app gets a reason.
    assert failed["event"]["data"]["reason"] == "rejected"
    # What the event says, not its random id or timestamp (either may hold "550").
    assert "mailbox unavailable" not in json.dumps(failed)
    assert "550" not in json.dumps(failed["event"]["data"])
    assert delivered["webhook_id"] != failed["webhook_id"]


def _claim_webhook(conn: psycopg.Connection) -> jobs.ClaimedJob:
    conn.execute("DELETE FROM email_jobs WHERE kind = 'email'")
    [job] = jobs.claim_batch(conn, "w1", 10, 30)
    assert job.kind == "webhook"
    return job


@pytest.mark.parametrize("target", ["http://127.0.0.1:{port}/h", "https://localhost:{port}/h"])
def test_a_private_webhook_address_is_refused_at_send_time_in_production(
    conn, client, svc, settings, target
):
    with serving() as receiver:
        port = receiver.server.server_address[1]
        # Registered outside production (or the name resolved elsewhere then).
        app, key, _ = register_webhook_app(conn, settings, target.format(port=port))
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=True)
        outcome = delivery.decide(job, time.monotonic() + 30)
    assert receiver.requests == []  # never connected
    assert outcome.event == "retry"
    assert outcome.error is not None and outcome.error.startswith("refused:")


def test_a_name_that_resolves_to_private_and_public_addresses_is_refused(
    conn, client, svc, settings, monkeypatch
):
    real = socket.getaddrinfo

    def mixed(host, port, *args, **kwargs):
        if host == "mixed.example":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", mixed)
    app, key, _ = register_webhook_app(conn, settings, "https://mixed.example/h")
    _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
    job = _claim_webhook(conn)
    outcome = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, True).decide(
        job, time.monotonic() + 30
    )
    assert outcome.event == "retry" and "10.0.0.7" in (outcome.error or "")


def test_the_connection_goes_to_the_address_that_was_checked(
    conn, client, svc, settings, monkeypatch
):
    """DNS rebinding: the name is resolved once; a second answer is never used."""
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1", "192.0.2.1"])  # the second would be a different host
    asked: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.example":
            asked.append(host)
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with serving() as receiver:
        port = receiver.server.server_address[1]
        app, key, _ = register_webhook_app(conn, settings, f"http://rebind.example:{port}/h")
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        outcome = delivery.decide(job, time.monotonic() + 30)
    assert outcome.event == "sent", outcome.error
    assert asked == ["rebind.example"]
    assert receiver.requests[0].headers["host"] == f"rebind.example:{port}"


def test_a_redirect_is_not_followed(conn, client, svc, settings):
    with serving(statuses=[302]) as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        outcome = delivery.decide(job, time.monotonic() + 30)
    assert len(receiver.requests) == 1
    assert (outcome.event, outcome.error) == ("retry", "receiver answered HTTP 302")


def test_a_revoked_apps_pending_events_fail_instead_of_being_sent(conn, client, svc, settings):
    with serving() as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        revoke_app(conn, app.id)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        outcome = delivery.decide(job, time.monotonic() + 30)
    assert receiver.requests == []
    assert outcome.event == "failed"


def test_a_secret_sealed_for_one_app_does_not_open_for_another(conn, client, svc, settings):
    with serving() as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url)
        other, _k, _s = register_webhook_app(conn, settings, receiver.url, "other")
        conn.execute(
            "UPDATE apps SET webhook_secret = (SELECT webhook_secret FROM apps WHERE id = %s)"
            " WHERE id = %s",
            (other.id, app.id),
        )
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        outcome = delivery.decide(job, time.monotonic() + 30)
    assert receiver.requests == []
    assert outcome.event == "failed" and "opens" in (outcome.error or "")


def test_the_stored_secret_is_sealed_not_plain(conn, settings):
    with serving() as receiver:
        app, _key, secret = register_webhook_app(conn, settings, receiver.url)
    stored = bytes(conn.execute("SELECT webhook_secret FROM apps").fetchone()[0])
    raw = secret.removeprefix("whsec_").encode()
    assert secret.startswith("whsec_") and raw not in stored and secret.encode() not in stored
    assert app.id is not None


def test_the_receiver_example_in_the_docs_verifies_real_deliveries(
    conn, client, svc, settings, monkeypatch
):
    """docs/api.md's receiver, run as written, accepts a delivery and refuses a forgery."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    section = text[text.index("## Events (webhooks)") :]
    start = section.index("```python\n") + len("```python\n")
    example = section[start : section.index("```", start)]
    with serving() as receiver:
        app, key, secret = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        assert delivery.decide(job, time.monotonic() + 30).event == "sent"
    [sent] = receiver.requests
    handled: list[tuple[str, object]] = []
    monkeypatch.setenv("AUTHSVC_WEBHOOK_SECRET", secret)
    namespace: dict[str, Any] = {
        "__name__": __name__,  # Flask(__name__) needs a module it can locate
        "seen_before": lambda _id: False,
        "handle": lambda t, d: handled.append((t, d)),
    }
    exec(compile(example, "docs/api.md", "exec"), namespace)  # noqa: S102  (our own docs)
    receiver_app = namespace["app"].test_client()
    answer = receiver_app.post("/hooks/authsvc", data=sent.body, headers=sent.headers)
    assert answer.status_code == 204
    assert handled == [("user.verified", json.loads(sent.body)["data"])]
    forged = sent.body.replace(b"ada@", b"eve@")
    assert receiver_app.post("/hooks/authsvc", data=forged, headers=sent.headers).status_code == 400


def test_outbox_show_prints_a_webhook_job_and_its_trail(conn, client, svc, settings, env):
    from click.testing import CliRunner

    from authsvc.cli import main

    with serving(statuses=[503]) as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        assert jobs.record_outcomes(conn, [delivery.decide(job, time.monotonic() + 30)]) == [True]
    result = CliRunner(env=env).invoke(main, ["outbox", "show", str(job.id)], env=env)
    assert result.exit_code == 0, result.output
    assert "user.verified" in result.output and receiver.url in result.output
    assert "retry" in result.output and "receiver answered HTTP 503" in result.output


def test_a_receiver_that_answers_a_byte_at_a_time_is_cut_off_at_the_deadline(
    conn, client, svc, settings
):
    """Per-read timeouts alone would wait for the whole trickle and call it sent."""
    import threading

    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def trickle() -> None:
        peer, _ = listener.accept()
        with peer:
            peer.recv(65536)
            for byte in answer:  # each byte well inside the read timeout
                if done.wait(0.1):
                    return
                try:
                    peer.sendall(bytes([byte]))
                except OSError:
                    return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/h"
    try:
        app, key, _ = register_webhook_app(conn, settings, url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 1.0, production=False)
        outcome = delivery.decide(job, time.monotonic() + 30)
    finally:
        done.set()
        listener.close()
        thread.join(5)
    assert outcome.event == "retry"
    assert "no complete answer within 1s" in (outcome.error or "")


@pytest.mark.e2e
def test_the_worker_command_delivers_webhooks(conn, client, svc, settings, env, tmp_path):
    """`authsvc worker` as shipped signs and sends webhook jobs (the CLI wires it up)."""
    from tests.worker_support import start_worker_process, stop_process

    with serving() as receiver:
        app, key, secret = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        process = start_worker_process(
            {**env, "AUTHSVC_SMTP_URL": "null://"}, tmp_path / "worker.log", "--once"
        )
        try:
            assert process.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
        finally:
            stop_process(process)
    [delivery] = receiver.of_type("user.verified")
    assert Webhook(secret).verify(delivery.body, delivery.headers)["type"] == "user.verified"


def test_a_receiver_that_always_fails_ends_failed_after_the_last_attempt_and_can_be_redriven(
    conn, client, svc, settings, clock, database_url
):
    from authsvc.outbox.admin import redrive_job
    from authsvc.worker.delivery import RetryPolicy

    with serving(statuses=[500] * 3) as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        conn.execute("DELETE FROM email_jobs WHERE kind = 'email'")
        retry = RetryPolicy(max_attempts=3, base_seconds=0.05, cap_seconds=0.1)
        with running(webhook_worker(database_url, settings, clock, retry=retry)):
            wait_until(lambda: _webhook_jobs(conn)[0][2] == "failed", what="the job failed")
            [(job_id, _t, _s, attempts)] = _webhook_jobs(conn)
            assert attempts == 3 and len(receiver.requests) == 3
            # Kept, not lost: a redrive sends it again (the receiver is fixed now).
            assert redrive_job(conn, job_id)
            wait_until(lambda: _webhook_jobs(conn)[0][2] == "sent", what="the redriven job sent")
    assert len({r.headers["webhook-id"] for r in receiver.requests}) == 1


def test_a_malformed_event_row_fails_that_job_and_spares_the_worker(conn, settings):
    with serving() as receiver:
        app, _key, _ = register_webhook_app(conn, settings, receiver.url)
        conn.execute(
            "INSERT INTO email_jobs (kind, template, recipient, payload, app_id)"
            " VALUES ('webhook', 'user.verified', %s, '{}', %s)", (receiver.url, app.id)
        )
        [job] = jobs.claim_batch(conn, "w1", 10, 30)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        outcome = delivery.decide(job, time.monotonic() + 30)
    assert outcome.event == "failed" and "malformed" in (outcome.error or "")
    assert receiver.requests == []


def test_a_new_webhook_secret_signs_pending_events_at_once(conn, client, svc, settings):
    from authsvc.apps.keys import replace_webhook_secret

    with serving() as receiver:
        app, key, old_secret = register_webhook_app(conn, settings, receiver.url)
        _sign_up_and_verify(ApiCaller(client, app, key), conn, svc)
        new_secret = replace_webhook_secret(conn, app.id, settings.secret_keys)
        job = _claim_webhook(conn)
        delivery = WebhookDelivery(settings.secret_keys, FAST_RETRY, 2.0, production=False)
        assert delivery.decide(job, time.monotonic() + 30).event == "sent"
    [sent] = receiver.requests
    Webhook(new_secret).verify(sent.body, sent.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old_secret).verify(sent.body, sent.headers)


def test_an_apps_events_do_not_tell_it_which_addresses_have_accounts(conn, client, svc, settings):
    """Reset and verification requests answer 202 alike for every address; their
    outcome events must not undo that. Before the fix an app learned, from
    email.delivered, which addresses had an account (reset) or were unconfirmed
    (verification), for accounts made anywhere (found in review)."""
    actions.sign_up(conn, svc, email="victim@example.com", password=PASSWORD)
    conn.execute("UPDATE users SET email_verified_at = now() WHERE email = 'victim@example.com'")
    actions.sign_up(conn, svc, email="pending@example.com", password=PASSWORD)
    conn.execute("DELETE FROM email_jobs")
    with serving() as receiver:
        app, key, _ = register_webhook_app(conn, settings, receiver.url, "prober")
        api = ApiCaller(client, app, key)
        answers = set()
        for address in ("victim@example.com", "nobody@example.com", "pending@example.com"):
            for path in ("/password-resets", "/verifications"):
                reply = api.post(path, {"email": address})
                answers.add((reply.status_code, reply.get_data()))
    assert len(answers) == 1
    claimed = jobs.claim_batch(conn, "w1", 50, 30)
    assert len(claimed) == 3  # two resets and one verification did go out
    jobs.record_outcomes(conn, [Outcome(j, "sent", provider_message_id="<m>") for j in claimed])
    assert _webhook_jobs(conn) == []


@pytest.mark.parametrize(
    "literal",
    [
        "::7f00:1",  # IPv4-compatible 127.0.0.1
        "::a9fe:a9fe",  # IPv4-compatible 169.254.169.254
        "64:ff9b:1::7f00:1",  # local-use NAT64 prefix
        "::ffff:0:7f00:1",  # IPv4-translated 127.0.0.1
        "fec0::1",  # deprecated site-local
        "64:ff9b::a9fe:a9fe",  # well-known NAT64 of the metadata address
    ],
)
def test_ipv6_forms_that_reach_private_networks_are_not_public(literal):
    """Found in review: these passed the check, and a NAT64 on the path would
    carry a request to the cloud metadata address."""
    assert not is_public_address(ipaddress.ip_address(literal))


def test_a_public_ipv6_address_is_public():
    assert is_public_address(ipaddress.ip_address("2606:4700:4700::1111"))


@pytest.mark.parametrize("url", ["https://example.com/caf\u00e9", "https://b\u00fccher.example/h",
                                 "https://example.com/h?q=\u00e9"])
def test_a_webhook_url_that_is_not_ascii_is_refused_with_the_form_to_use(url):
    """http.client writes the request line and Host in ASCII: such a URL would raise a
    UnicodeEncodeError in the sender (stopping the worker) rather than be refused."""
    with pytest.raises(WebhookTargetRefused, match="ASCII"):
        validate_webhook_url(url, production=False)
