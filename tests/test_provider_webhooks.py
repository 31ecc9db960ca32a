"""SPEC §10: bounce and complaint webhooks, the suppression list, and `suppressed` jobs.

An attacker who can reach the endpoint must not be able to silence an
address: every refusal (bad signature, stale timestamp, replayed id) is
checked to change nothing. A suppressed address must not be detectable
through the API: the 202 is byte-identical to any other address's.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook

from authsvc.config import parse_http_provider_url
from authsvc.worker import jobs
from authsvc.worker.providers.resend import ResendMailer
from tests.accounts_support import insert_user
from tests.api_support import ApiCaller, assert_problem, register_shop_app
from tests.link_support import latest_claims
from tests.worker_support import authsvc_command, deliver_now, delivery
from tools.local_resend import LocalResend

SECRET = "whsec_" + base64.b64encode(b"provider-webhook-test-secret-32b").decode()
PATH = "/webhooks/provider/resend"
FAR = float("inf")


@pytest.fixture
def hooked_app(app_with):
    return app_with(AUTHSVC_PROVIDER_WEBHOOK_SECRET=SECRET)


@pytest.fixture
def hook(hooked_app):
    return hooked_app.test_client()


@pytest.fixture
def sent(conn) -> None:
    """The email the events below are about: sent to gone@example.com, taken by Resend
    as 4ef9a417-… (a notification about any other suppresses nothing)."""
    conn.execute("INSERT INTO email_jobs (template, recipient, status, sent_at,"
                 " provider_message_id) VALUES ('no_account', 'gone@example.com', 'sent',"
                 " now(), '4ef9a417-02e9-4d39-ad75-9611e0fcc33c')")


def _event(kind: str = "email.bounced", to: str = "gone@example.com",
           bounce_type: str = "Permanent") -> dict:
    data: dict = {"email_id": "4ef9a417-02e9-4d39-ad75-9611e0fcc33c", "to": [to],
                  "from": "authsvc <no-reply@example.com>", "subject": "Reset your password",
                  "created_at": "2026-12-01T08:00:00.000Z"}
    if kind == "email.bounced":
        data["bounce"] = {"type": bounce_type, "subType": "General",
                          "message": "The recipient's mailbox does not exist."}
    return {"type": kind, "created_at": "2026-12-01T08:00:01.000Z", "data": data}


def _signed(event: dict, *, msg_id: str = "msg_2c7Wq1", when: datetime | None = None,
            secret: str = SECRET, prefix: str = "svix") -> tuple[bytes, dict[str, str]]:
    body = json.dumps(event)
    when = when or datetime.now(UTC)
    signature = Webhook(secret).sign(msg_id, when, body)
    headers = {f"{prefix}-id": msg_id, f"{prefix}-timestamp": str(int(when.timestamp())),
               f"{prefix}-signature": signature, "Content-Type": "application/json"}
    return body.encode(), headers


def _post(hook, event: dict, **kwargs):
    body, headers = _signed(event, **kwargs)
    return hook.post(PATH, data=body, headers=headers)


def _state(conn) -> tuple[list, list]:
    return (conn.execute("SELECT address, event FROM suppressions ORDER BY 1").fetchall(),
            conn.execute("SELECT message_id FROM provider_webhook_messages").fetchall())


def test_a_signed_hard_bounce_suppresses_the_address(hook, conn, sent):
    response = _post(hook, _event(to="Gone@Example.com"))
    assert response.status_code == 200, response.get_data(as_text=True)
    row = conn.execute("SELECT address, event, provider, provider_message_id, detail,"
                       " suppressed_at > now() - interval '1 minute' FROM suppressions"
                       ).fetchone()
    assert row[:4] == ("gone@example.com", "email.bounced", "resend",
                       "4ef9a417-02e9-4d39-ad75-9611e0fcc33c")
    assert "Permanent" in row[4] and row[5] is True


def test_standard_webhooks_header_names_work_too(hook, conn, sent):
    assert _post(hook, _event("email.complained"), prefix="webhook").status_code == 200
    assert _state(conn)[0] == [("gone@example.com", "email.complained")]


def test_a_soft_bounce_and_other_events_suppress_nothing(hook, conn):
    assert _post(hook, _event(bounce_type="Transient"), msg_id="m1").status_code == 200
    assert _post(hook, _event("email.delivered"), msg_id="m2").status_code == 200
    assert _state(conn)[0] == []


@pytest.mark.parametrize("tamper", ["wrong secret", "changed body", "garbage signature",
                                    "no signature", "stale timestamp", "future timestamp"])
def test_unverifiable_webhooks_are_refused_and_change_nothing(hook, conn, tamper):
    secret = "whsec_" + base64.b64encode(b"someone-else-entirely-32-bytes!!").decode()
    when = {"stale timestamp": datetime.now(UTC) - timedelta(minutes=10),
            "future timestamp": datetime.now(UTC) + timedelta(minutes=10)}.get(tamper)
    body, headers = _signed(_event(), secret=secret if tamper == "wrong secret" else SECRET,
                            when=when)
    if tamper == "changed body":
        body = json.dumps(_event(to="victim@example.com")).encode()
    if tamper == "garbage signature":
        headers["svix-signature"] = "not-a-signature"
    if tamper == "no signature":
        del headers["svix-signature"]
    response = hook.post(PATH, data=body, headers=headers)
    assert_problem(response, 401, "invalid_signature")
    assert _state(conn) == ([], [])


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "\"email.bounced\""])
def test_a_signed_body_that_is_not_an_event_is_refused(hook, conn, body):
    when = datetime.now(UTC)
    headers = {"svix-id": "msg_x", "svix-timestamp": str(int(when.timestamp())),
               "svix-signature": Webhook(SECRET).sign("msg_x", when, body)}
    assert_problem(hook.post(PATH, data=body, headers=headers), 400, "invalid_request")
    assert _state(conn) == ([], [])


def test_a_replayed_message_id_is_refused_and_changes_nothing(hook, conn, sent):
    assert _post(hook, _event()).status_code == 200
    conn.execute("DELETE FROM suppressions")  # the operator lifted it since
    again = _post(hook, _event())  # a captured delivery, re-sent (freshly timed, same id)
    # Acknowledged, not acted on: the provider's own retry of a message whose
    # first 200 got lost reuses the id, and a non-2xx answer would keep it
    # retrying until the provider disables the endpoint (found in review).
    assert again.status_code == 200
    assert again.get_json() == {"received": True, "duplicate": True, "suppressed": 0}
    assert _state(conn)[0] == []


def test_without_a_secret_the_endpoint_does_not_exist(client, conn):
    body, headers = _signed(_event())
    assert client.post(PATH, data=body, headers=headers).status_code == 404
    assert client.post("/webhooks/provider/postmark", data=body).status_code == 404
    assert _state(conn) == ([], [])


def _reset_answer(api: ApiCaller, email: str):
    response = api.post("/password-resets", {"email": email})
    return response.status_code, response.get_data(), sorted(response.headers.items())


def test_a_bounced_addresss_next_job_is_suppressed_and_the_api_cannot_tell(
        hook, hooked_app, sent, conn, pool, settings, passwords, clock):
    hash_ = passwords.hash("x" * 12)
    insert_user(conn, "gone@example.com", hash_)
    insert_user(conn, "fine@example.com", hash_)
    assert _post(hook, _event(to="gone@example.com")).status_code == 200
    _app, key = register_shop_app(conn)
    api = ApiCaller(hooked_app.test_client(), _app, key)
    assert _reset_answer(api, "gone@example.com") == _reset_answer(api, "fine@example.com")

    with LocalResend() as provider:
        mailer = ResendMailer(parse_http_provider_url(provider.mail_url), timeout=2.0)
        with pool.connection() as c:
            claimed = jobs.claim_batch(c, "tester", 10, lease_seconds=30)
        outcomes = {job.recipient: deliver_now(pool, delivery(pool, settings, clock), mailer, job)
                    for job in claimed}
        assert outcomes == {"gone@example.com": "suppressed", "fine@example.com": "sent"}
        assert [d.to for d in provider.snapshot()] == [("fine@example.com",)]
    trail = conn.execute("SELECT e.event FROM email_job_events e JOIN email_jobs j"
                         " ON j.id = e.job_id WHERE j.recipient = 'gone@example.com'"
                         " AND j.template = 'reset' ORDER BY e.id").fetchall()
    assert trail == [("claimed",), ("suppressed",)]
    metrics = hooked_app.test_client().get("/metrics").get_data(as_text=True)
    assert "authsvc_email_suppressed_total 1.0" in metrics.splitlines()
    assert 'authsvc_outbox_jobs{status="suppressed"} 1.0' in metrics.splitlines()


def test_the_owners_successful_reset_does_not_lift_the_suppression(hook, hooked_app, conn,
                                                                   sent, svc, passwords):
    hash_ = passwords.hash("x" * 12)
    insert_user(conn, "gone@example.com", hash_)
    assert _post(hook, _event()).status_code == 200
    _app, key = register_shop_app(conn)
    api = ApiCaller(hooked_app.test_client(), _app, key)
    api.post("/password-resets", {"email": "gone@example.com"})
    token = svc.tokens.mint(latest_claims(conn, "gone@example.com", "reset"))
    confirmed = api.post("/password-resets/confirm",
                         {"token": token, "password": "a brand new passphrase"})
    assert confirmed.status_code == 200, confirmed.get_json()
    assert _state(conn)[0] == [("gone@example.com", "email.bounced")]


def _cli(env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*authsvc_command(), "suppressions", *args], env={**env},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.e2e  # runs the authsvc command
def test_operators_list_and_remove_suppressions(hook, conn, sent, env):
    full = {**os.environ, **env}
    assert _cli(full, "list").stdout.strip() == "no suppressed addresses"
    assert _post(hook, _event()).status_code == 200
    listed = _cli(full, "list")
    assert listed.returncode == 0 and "gone@example.com" in listed.stdout
    assert "email.bounced" in listed.stdout and "4ef9a417" in listed.stdout
    removed = _cli(full, "remove", "Gone@Example.com")
    assert removed.returncode == 0, removed.stderr
    assert _state(conn)[0] == []
    again = _cli(full, "remove", "gone@example.com")
    assert again.returncode != 0 and "is not suppressed" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.e2e  # runs the authsvc command
@pytest.mark.parametrize("address", ["not an address", "a<b@example.com>", ""])
def test_remove_refuses_a_malformed_address(env, address):
    result = _cli({**os.environ, **env}, "remove", address)
    assert result.returncode == 2 and "ADDRESS" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_wrong_method_or_an_oversized_body_is_a_problem_not_a_page(hook):
    wrong = hook.get("/webhooks/provider/resend")
    assert wrong.status_code == 405 and wrong.mimetype == "application/problem+json"
    assert wrong.json["code"] == "method_not_allowed" and "POST" in wrong.headers["Allow"]
    big = hook.post("/webhooks/provider/resend", data=b"x" * (100 * 1024),
                    content_type="application/json")
    assert big.status_code == 413 and big.mimetype == "application/problem+json"
    assert big.json["code"] == "payload_too_large"
