"""SPEC §10: the HTTP provider (Resend's shape) and how each answer class is handled.

Against the local provider (tools/local_resend.py), a real HTTP server in this
process, and real PostgreSQL for everything that records an outcome.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from authsvc.config import load_settings, parse_http_provider_url
from authsvc.worker import jobs
from authsvc.worker.delivery import RetryPolicy
from authsvc.worker.mailers import AmbiguousSendError, PermanentSendError, TransientSendError
from authsvc.worker.providers import mailer_factory
from authsvc.worker.providers.http import retry_after_seconds
from authsvc.worker.providers.resend import ResendMailer
from testkit.waiting import wait_until
from tests.worker_support import (
    claim_one,
    deliver_now,
    delivery,
    job_status,
    public_id_of,
    queue_notices,
    rendered_notice,
    renderer,
)
from tools import local_resend
from tools.local_resend import LocalResend

FAR = float("inf")


@pytest.fixture
def provider():
    with LocalResend() as local:
        yield local


def _mailer(provider: LocalResend, timeout: float = 2.0) -> ResendMailer:
    return ResendMailer(parse_http_provider_url(provider.mail_url), timeout=timeout)


def test_accepted_send_is_recorded_sent_with_the_providers_id(conn, pool, settings, provider):
    [job_id] = queue_notices(conn, 1)
    assert deliver_now(pool, delivery(pool, settings), _mailer(provider), claim_one(pool)) == "sent"
    [accepted] = provider.snapshot()
    row = conn.execute("SELECT status, provider_message_id FROM email_jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row == ("sent", accepted.id)
    [request] = provider.requests
    assert request["headers"]["idempotency-key"] == f"authsvc-job-{public_id_of(conn, job_id)}"
    assert request["headers"]["authorization"] == f"Bearer {provider.api_key}"


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_408_429_and_5xx_are_retried(conn, pool, settings, provider, status):
    [job_id] = queue_notices(conn, 1)
    provider.fail_next(status)
    deliverer = delivery(pool, settings, retry=RetryPolicy(base_seconds=0.01))
    assert deliver_now(pool, deliverer, _mailer(provider), claim_one(pool)) == "retry"
    assert job_status(conn, job_id)[0] == "pending"
    assert not provider.snapshot()


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_fail_the_job_with_the_providers_message(conn, pool, settings, provider,
                                                           status):
    [job_id] = queue_notices(conn, 1)
    provider.fail_next(status)
    outcome = deliver_now(pool, delivery(pool, settings), _mailer(provider), claim_one(pool))
    assert outcome == "failed"
    row = conn.execute("SELECT status, last_error FROM email_jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row[0] == "failed"
    assert row[1].startswith(f"HTTP {status}: ") and row[1].endswith(": injected fault")


def test_a_wrong_api_key_fails_with_the_providers_message(conn, pool, settings, provider):
    queue_notices(conn, 1)
    target = parse_http_provider_url(provider.mail_url.replace(provider.api_key, "re_wrong"))
    with pytest.raises(PermanentSendError, match="HTTP 401: invalid_api_key: API key is invalid"):
        ResendMailer(target, timeout=2.0).send(renderer(settings).render(claim_one(pool)))


def test_a_timeout_is_retried_with_the_same_key_and_delivered_once(conn, pool, settings,
                                                                   provider):
    email = rendered_notice(settings, pool, conn)
    provider.stall_next(1.5)  # accepted, then no answer within the 1 s timeout
    mailer = _mailer(provider, timeout=1.0)
    with pytest.raises(TransientSendError, match="retried with the same key"):
        mailer.send(email)
    wait_until(provider.idle, what="the stalled answer to go out")
    first_id = provider.snapshot()[0].id
    assert mailer.send(email) == first_id  # the first answer, again
    keys = [r["headers"]["idempotency-key"] for r in provider.requests]
    assert keys == [f"authsvc-job-{email.public_job_id}"] * 2
    assert len(provider.snapshot()) == 1 and provider.replays == 1


def test_a_connection_dropped_after_accepting_is_retried_and_delivered_once(conn, pool,
                                                                            settings, provider):
    [job_id] = queue_notices(conn, 1)
    provider.drop_next()
    deliverer = delivery(pool, settings, retry=RetryPolicy(base_seconds=0.01))
    mailer = _mailer(provider)
    assert deliver_now(pool, deliverer, mailer, claim_one(pool)) == "retry"
    conn.execute("UPDATE email_jobs SET next_attempt_at = now() WHERE id = %s", (job_id,))
    assert deliver_now(pool, deliverer, mailer, claim_one(pool)) == "sent"
    [accepted] = provider.snapshot()
    row = conn.execute("SELECT provider_message_id FROM email_jobs WHERE id = %s",
                       (job_id,)).fetchone()
    assert row[0] == accepted.id


def test_retry_after_seconds_is_a_floor_for_the_backoff(conn, pool, settings, provider):
    [job_id] = queue_notices(conn, 1)
    provider.fail_next(429, retry_after="120")
    deliverer = delivery(pool, settings, retry=RetryPolicy(base_seconds=0.01))
    assert deliver_now(pool, deliverer, _mailer(provider), claim_one(pool)) == "retry"
    wait = conn.execute("SELECT extract(epoch FROM next_attempt_at - now())::float8"
                        " FROM email_jobs WHERE id = %s", (job_id,)).fetchone()[0]
    assert 115 < wait <= 120


def test_retry_after_as_an_http_date(conn, pool, settings, provider):
    email = rendered_notice(settings, pool, conn)
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    provider.fail_next(503, retry_after=when)
    with pytest.raises(TransientSendError) as caught:
        _mailer(provider).send(email)
    assert caught.value.retry_after is not None and 80 < caught.value.retry_after <= 90


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1e9"])
def test_a_malformed_retry_after_is_ignored(value):
    assert retry_after_seconds(value) is None


def test_an_absurd_retry_after_is_capped_at_a_day():
    assert retry_after_seconds("999999999") == 86400


def test_a_concurrent_request_with_the_same_key_is_retried_not_failed(conn, pool, settings,
                                                                      provider):
    email = rendered_notice(settings, pool, conn)
    provider.stall_next(2.0)
    slow, fast = _mailer(provider, timeout=1.0), _mailer(provider)
    with pytest.raises(TransientSendError):
        slow.send(email)  # still being answered at the provider
    with pytest.raises(TransientSendError, match="concurrent_idempotent_requests"):
        fast.send(email)


def test_the_same_key_with_another_body_fails(conn, pool, settings, provider):
    email = rendered_notice(settings, pool, conn)
    mailer = _mailer(provider)
    mailer.send(email)
    changed = type(email)(**{**email.__dict__, "subject": "something else"})
    with pytest.raises(PermanentSendError, match="invalid_idempotent_request"):
        mailer.send(changed)


def test_the_request_body_is_resends_documented_shape(conn, pool, settings, provider):
    email = rendered_notice(settings, pool, conn)
    _mailer(provider).send(email)
    [request] = provider.requests
    body = request["body"]
    # Resend's documented body parameters, as the local provider (written from
    # the API reference, separately from the mailer) accepts them.
    assert set(body) <= local_resend.DOCUMENTED_FIELDS
    assert set(body) == {"from", "to", "subject", "text", "html", "headers", "tags"}
    assert body["from"] == settings.mail_from
    assert body["to"] == [email.recipient]
    assert body["subject"] == "Your password was changed"
    assert body["text"].strip() and body["html"].lstrip().startswith("<")
    # The email's language travels with it (SPEC §14), as in the SMTP message.
    assert body["headers"] == {"Content-Language": "en", "X-Authsvc-Job": str(email.public_job_id)}
    for tag in body["tags"]:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,256}", tag["name"])
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,256}", tag["value"])
    assert request["headers"]["content-type"] == "application/json"


def test_the_body_is_the_same_on_every_attempt(conn, pool, settings, clock):
    """A provider compares a retried body with the first under the same key."""
    queue_notices(conn, 1)
    job = claim_one(pool)
    render = renderer(settings, clock)
    first = render.render(job)
    clock.advance(90)  # the retry, later: the MIME Date header changes; the JSON body must not
    again = render.render(job)
    assert first.data != again.data
    assert ResendMailer.body(None, first) == ResendMailer.body(None, again)  # type: ignore[arg-type]


def test_one_connection_is_reused_across_sends(conn, pool, settings, provider):
    queue_notices(conn, 3)
    r = renderer(settings)
    mailer = _mailer(provider)
    with pool.connection() as c:
        claimed = jobs.claim_batch(c, "tester", 3, lease_seconds=30)
    for job in claimed:
        mailer.send(r.render(job))
    assert len({request["peer"] for request in provider.requests}) == 1


class _KeylessProvider(ResendMailer):
    """A provider without idempotency keys (Postmark, SES): one class attribute differs."""

    idempotent = False


def test_without_an_idempotency_key_a_lost_answer_is_ambiguous(conn, pool, settings, provider):
    email = rendered_notice(settings, pool, conn)
    provider.drop_next()
    mailer = _KeylessProvider(parse_http_provider_url(provider.mail_url), timeout=2.0)
    with pytest.raises(AmbiguousSendError):
        mailer.send(email)
    assert "idempotency-key" not in provider.requests[0]["headers"]


def test_mail_url_selects_the_transport(tmp_path, provider):
    settings = load_settings({"AUTHSVC_DATA_DIR": str(tmp_path),
                              "AUTHSVC_MAIL_URL": provider.mail_url})
    mailer = mailer_factory(settings)(2.0)
    assert isinstance(mailer, ResendMailer)
    assert mailer.target.base_url == f"http://127.0.0.1:{provider.port}"
