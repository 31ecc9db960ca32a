"""SPEC §10 `hook://`: an app that delivers its own mail, and what it must never get.

The app is tools/local_hook.py, a real HTTP server that verifies the
Standard Webhooks signature and deduplicates on `webhook-id` as the docs
tell apps to; the transport beside it is the local Resend-like provider.
What a user would notice: their reset arrives once through the app, with a
link that works; another app's user's email never reaches this app; and
nothing the hook sees tells the app which addresses have accounts.
"""

from __future__ import annotations

import json
from datetime import UTC

import pytest
from standardwebhooks.webhooks import Webhook

from authsvc.apps.keys import clear_delivery_url, register_app, revoke_app, set_delivery_url
from authsvc.config import parse_http_provider_url
from authsvc.services import token_codec
from authsvc.worker import jobs
from authsvc.worker.delivery import Delivery, RetryPolicy
from authsvc.worker.hook_delivery import HookDelivery, hook_body
from authsvc.worker.providers.resend import ResendMailer
from authsvc.worker.render import Renderer
from testkit.waiting import wait_until
from tests.accounts_support import insert_user
from tests.api_support import ApiCaller
from tests.link_support import latest_link
from tests.worker_support import queue_notices, renderer
from tools.local_hook import LocalHook
from tools.local_provider import Answer
from tools.local_resend import LocalResend

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture
def hook():
    with LocalHook() as app_side:
        yield app_side


@pytest.fixture
def transport():
    with LocalResend() as provider:
        yield provider


def _delivery(pool, settings, *, production: bool = False, retry: RetryPolicy | None = None,
              timeout: float = 2.0) -> Delivery:
    return Delivery(pool, renderer(settings), retry or RetryPolicy(base_seconds=0.01), timeout,
                    hook=HookDelivery(settings.secret_keys, timeout, production))


def _send_all(pool, deliverer: Delivery, transport: LocalResend) -> dict[str, str]:
    """Claim and send every due job once: recipient → outcome."""
    mailer = ResendMailer(parse_http_provider_url(transport.mail_url), timeout=2.0)
    with pool.connection() as c:
        claimed = jobs.claim_batch(c, "tester", 50, lease_seconds=30)
    outcomes = {}
    for job in claimed:
        outcome = deliverer.decide(mailer, job, float("inf"))
        with pool.connection() as c:
            jobs.record_outcomes(c, [outcome])
        outcomes[job.recipient] = outcome.event
    return outcomes


def _app_with_hook(conn, settings, hook: LocalHook, name: str = "shop"):
    app, key = register_app(conn, name, ["https://allowed.example.com/welcome"])
    secret = set_delivery_url(conn, app.id, hook.url, settings.secret_keys)
    assert secret is not None and secret.startswith("whsec_")
    hook.secret = secret
    return app, key


def _own_proven_account(api: ApiCaller, conn, svc, email: str) -> None:
    """Signed up through the app and proven by its holder through the app's own email."""
    api.sign_up(email)
    token = latest_link(conn, svc, email, "verify")
    confirmed = api.post("/verifications/confirm", {"token": token})
    assert confirmed.status_code == 200, confirmed.get_json()
    conn.execute("DELETE FROM email_jobs")  # the signup's email is not under test here


def test_an_apps_own_users_reset_goes_to_its_hook_signed_and_whole(
        client, conn, pool, settings, svc, hook, transport):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    assert api.post("/password-resets", {"email": "ada@example.com"}).status_code == 202
    [job_id, public_id] = conn.execute("SELECT id, public_id FROM email_jobs").fetchone()

    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "sent"}
    assert transport.snapshot() == []  # not through authsvc's transport
    [request] = hook.requests
    headers = request["headers"]
    assert headers["webhook-id"] == f"authsvc-job-{public_id}"
    assert hook.secret is not None
    Webhook(hook.secret).verify(request["raw"], {k: v for k, v in headers.items()
                                                 if k.startswith("webhook-")})
    event = request["body"]
    assert event["type"] == "email.send"
    data = event["data"]
    assert data["to"] == "ada@example.com" and data["kind"] == "reset"
    assert data["from"] == settings.mail_from and data["locale"] == "en"
    assert data["subject"] == "Reset your password"
    assert data["link"] in data["text"] and data["code"] in data["text"]
    assert data["link"] in data["html"].replace("&amp;", "&")
    row = conn.execute("SELECT status, provider_message_id FROM email_jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row == ("sent", f"authsvc-job-{public_id}")
    # The link the app delivered is the real one: the person can use it.
    token = data["link"].rsplit("token=", 1)[1]
    reset = api.post("/password-resets/confirm", {"token": token, "password": NEW_PASSWORD})
    assert reset.status_code == 200, reset.get_json()


def test_every_retry_carries_the_same_id_and_body_and_the_app_keeps_one(
        client, conn, pool, settings, svc, hook, transport):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    hook.fail_next(503)  # the app is down
    hook.drop_next()  # the app took it, and the answer was lost
    deliverer = _delivery(pool, settings)
    outcomes = []
    for _ in range(3):
        outcomes.append(_send_all(pool, deliverer, transport)["ada@example.com"])
        conn.execute("UPDATE email_jobs SET next_attempt_at = now()")
    assert outcomes == ["retry", "retry", "sent"]
    ids = {r["headers"]["webhook-id"] for r in hook.requests}
    bodies = {json.dumps(r["body"], sort_keys=True) for r in hook.requests}
    assert len(hook.requests) == 3 and len(ids) == 1 and len(bodies) == 1
    assert len(hook.snapshot()) == 1  # deduplicated by the app to exactly one


def test_an_app_that_takes_the_email_then_hangs_gets_the_same_id_again(
        client, conn, pool, settings, svc, hook, transport):
    """A timeout is retried (the app may have it): the retry carries the same webhook-id,
    and the app keeps one email."""
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    hook.stall_next(1.5)  # stored, then no answer within the 1 s send timeout
    deliverer = _delivery(pool, settings, timeout=1.0)
    assert _send_all(pool, deliverer, transport) == {"ada@example.com": "retry"}
    wait_until(hook.idle, what="the stalled answer to go out")
    conn.execute("UPDATE email_jobs SET next_attempt_at = now()")
    assert _send_all(pool, deliverer, transport) == {"ada@example.com": "sent"}
    assert len({r["headers"]["webhook-id"] for r in hook.requests}) == 1
    assert len(hook.requests) == 2 and len(hook.snapshot()) == 1


@pytest.mark.parametrize("status, outcome", [(400, "failed"), (404, "failed"), (410, "failed"),
                                             (408, "retry"), (429, "retry"), (500, "retry"),
                                             (302, "retry")])
def test_the_apps_answer_decides_as_a_providers_would(client, conn, pool, settings, svc, hook,
                                                      transport, status, outcome):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    hook.fail_next(status, retry_after="120" if status == 429 else None)
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": outcome}
    assert transport.snapshot() == []
    if status == 429:
        wait = conn.execute("SELECT extract(epoch FROM next_attempt_at - now())::float8"
                            " FROM email_jobs").fetchone()[0]
        assert 115 < wait <= 120


@pytest.mark.parametrize("retry_after", ["\xb2", "Mon, 01 Jan 99999999999999999999 00:00:00 GMT"])
def test_an_apps_unreadable_retry_after_is_a_retry_not_a_crash(client, conn, pool, settings, svc,
                                                               hook, transport, retry_after):
    """The app's answer must never stop the worker that reads it (a non-ASCII digit, a date
    past the calendar): the job is retried on the usual backoff."""
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    hook.answer_next(Answer(503, b"", {"Retry-After": retry_after}))
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "retry"}
    conn.execute("UPDATE email_jobs SET next_attempt_at = now()")
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "sent"}
    assert len(hook.snapshot()) == 1


def test_a_delivery_url_that_is_not_ascii_is_refused_and_retried_not_a_crash(
        client, conn, pool, settings, svc, hook, transport):
    """http.client cannot put "café" in a request line: such a URL, stored before this check,
    is a refused target (retried while the operator fixes it), never an exception."""
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    conn.execute("UPDATE apps SET delivery_url = %s WHERE id = %s",
                 (f"{hook.origin}/caf\u00e9", app.id))
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "retry"}
    [error] = conn.execute("SELECT last_error FROM email_jobs").fetchone()
    assert "delivery URL refused" in error and hook.requests == []


def test_another_apps_users_mail_never_reaches_the_hook(client, conn, pool, settings, svc, hook,
                                                         transport):
    """An app asking a reset for someone else's account must not get its link or code."""
    theirs, their_key = register_app(conn, "theirs", ["https://theirs.example.com/"])
    _own_proven_account(ApiCaller(client, theirs, their_key), conn, svc, "bob@example.com")
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    assert api.post("/password-resets", {"email": "bob@example.com"}).status_code == 202
    assert _send_all(pool, _delivery(pool, settings), transport) == {"bob@example.com": "sent"}
    assert hook.requests == []
    [through_transport] = transport.snapshot()
    assert through_transport.to == ("bob@example.com",)


def test_an_account_of_two_apps_is_not_one_apps_to_deliver(client, conn, pool, settings, svc,
                                                           hook, transport):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    other, _ = register_app(conn, "other", ["https://other.example.com/"])
    conn.execute("INSERT INTO account_apps (user_id, app_id)"
                 " SELECT id, %s FROM users WHERE email = 'ada@example.com'", (other.id,))
    api.post("/password-resets", {"email": "ada@example.com"})
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "sent"}
    assert hook.requests == [] and len(transport.snapshot()) == 1


def test_what_the_hook_sees_does_not_tell_which_addresses_have_accounts(
        client, conn, pool, settings, svc, hook, transport, passwords):
    """Signups of new and taken addresses, resets of unknown and others' addresses: the
    hook sees nothing of any of them, so it cannot tell them apart."""
    insert_user(conn, "taken@example.com", passwords.hash("x" * 12))
    insert_user(conn, "unproven@example.com", passwords.hash("x" * 12), verified=False)
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    for email in ("new@example.com", "taken@example.com", "unproven@example.com"):
        assert api.post("/signups", {"email": email, "password": "correct horse battery"}
                        ).status_code == 202
    for email in ("nobody@example.com", "taken@example.com", "new@example.com"):
        assert api.post("/password-resets", {"email": email}).status_code == 202
    api.post("/verifications", {"email": "new@example.com"})  # the app's own, unproven
    outcomes = _send_all(pool, _delivery(pool, settings), transport)
    assert set(outcomes.values()) == {"sent"}
    assert hook.requests == []
    assert {d.to[0] for d in transport.snapshot()} == {
        "new@example.com", "taken@example.com", "unproven@example.com"}


def test_the_hook_is_read_when_sending_not_when_queueing(client, conn, pool, settings, svc, hook,
                                                          transport):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    assert clear_delivery_url(conn, app.id)
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "sent"}
    assert hook.requests == [] and len(transport.snapshot()) == 1
    api.post("/password-resets", {"email": "ada@example.com"})
    revoke_app(conn, app.id)
    assert _send_all(pool, _delivery(pool, settings), transport) == {"ada@example.com": "sent"}
    assert hook.requests == [] and len(transport.snapshot()) == 2


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/authsvc/mail",
                                 "https://127.0.0.1:{port}/authsvc/mail",
                                 "https://localhost:{port}/authsvc/mail",
                                 "https://[::1]:{port}/authsvc/mail"])
def test_in_production_a_private_delivery_url_is_never_called(client, conn, pool, settings, svc,
                                                               hook, transport, url):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    set_delivery_url(conn, app.id, url.format(port=hook.port), settings.secret_keys)
    api.post("/password-resets", {"email": "ada@example.com"})
    deliverer = _delivery(pool, settings, production=True)
    assert _send_all(pool, deliverer, transport) == {"ada@example.com": "retry"}
    error = conn.execute("SELECT last_error FROM email_jobs").fetchone()[0]
    assert "delivery URL refused" in error
    assert hook.requests == [] and hook.other_requests == []
    assert transport.snapshot() == []


def test_a_worker_without_signing_keys_leaves_hook_mail_waiting(client, conn, pool, settings, svc,
                                                                hook, transport):
    app, key = _app_with_hook(conn, settings, hook)
    api = ApiCaller(client, app, key)
    _own_proven_account(api, conn, svc, "ada@example.com")
    api.post("/password-resets", {"email": "ada@example.com"})
    deliverer = Delivery(pool, renderer(settings), RetryPolicy(base_seconds=0.01), 2.0)
    assert _send_all(pool, deliverer, transport) == {"ada@example.com": "retry"}
    assert hook.requests == [] and transport.snapshot() == []


def test_the_hook_body_is_the_same_bytes_whenever_it_is_sent(conn, settings, clock):
    queue_notices(conn, 1)
    created = conn.execute("SELECT created_at FROM email_jobs").fetchone()[0]
    render = Renderer(settings, token_codec(settings, clock), clock)
    [job] = jobs.claim_batch(conn, "tester", 1, lease_seconds=30)
    first = hook_body(job, render.render(job), settings.mail_from)
    clock.advance(3600)
    again = hook_body(job, render.render(job), settings.mail_from)
    assert first == again
    assert json.loads(first[1])["timestamp"] == created.astimezone(UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
