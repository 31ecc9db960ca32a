"""Pages that say only what is true: the resend page under the email limit, one way of
saying how long a link lives, and error pages in the site's frame (issue 10)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from uuid import uuid4

import pytest

from authsvc import ratelimit
from authsvc.durations import describe_duration
from authsvc.worker.jobs import ClaimedJob
from tests.link_support import latest_link
from tests.pages_support import make_account, queued, submit_on_link_page, text_of
from tests.worker_support import renderer

RESENT_SAYS = "If the address the old link was for can receive one, a new link is on its way."
RESEND_METRIC = "authsvc_page_resends_suppressed_total"


def _expired_verify_link(conn, svc, clock) -> str:
    make_account(conn, svc, verified=False)
    token = latest_link(conn, svc, "ann@example.com", "verify")
    clock.advance(svc.settings.verify_ttl)
    return token


def _spend_the_email_budget(conn, svc, email: str = "ann@example.com") -> None:
    """As if others had asked for links to `email` until its per-address limit is reached."""
    limit = svc.settings.rate_limit_email
    while ratelimit.hit(conn, "email_verify", email, limit, svc.clock()).allowed:
        pass


def _resend(client, token: str):
    answer = submit_on_link_page(client, "/links/resend", "/verify", token, purpose="verify")
    assert answer.status_code == 303
    return answer, client.get(answer.headers["Location"])


def _metric(client, name: str, purpose: str) -> int:
    for line in client.get("/metrics").get_data(as_text=True).splitlines():
        if line.startswith(f'{name}{{purpose="{purpose}"}} '):
            return int(float(line.split()[-1]))  # prometheus_client writes 1.0
    raise AssertionError(f"{name}{{purpose={purpose!r}}} is not in /metrics")


def test_a_resend_the_email_limit_held_back_is_logged_counted_and_not_claimed(
    client, conn, svc, clock, caplog
):
    token = _expired_verify_link(conn, svc, clock)
    _spend_the_email_budget(conn, svc)
    assert _metric(client, RESEND_METRIC, "verify") == 0
    caplog.set_level(logging.INFO, logger="authsvc")

    _, page = _resend(client, token)

    assert queued(conn, "ann@example.com", "verify") == 1  # the signup's, nothing new
    assert "We sent a new link" not in text_of(page)
    assert RESENT_SAYS in text_of(page)
    held = [r for r in caplog.records if r.getMessage() == "link_resend_suppressed"]
    assert [(r.purpose, r.reason, r.token_version) for r in held] == [
        ("verify", "email_rate_limited", 1)
    ]
    assert "ann@example.com" not in caplog.text
    assert _metric(client, RESEND_METRIC, "verify") == 1
    assert _metric(client, RESEND_METRIC, "reset") == 0


def test_the_resend_page_reads_the_same_whether_or_not_the_limit_held_it_back(
    client, conn, svc, clock
):
    token = _expired_verify_link(conn, svc, clock)
    sent_redirect, sent = _resend(client, token)
    assert queued(conn, "ann@example.com", "verify") == 2
    _spend_the_email_budget(conn, svc)
    held_redirect, held = _resend(client, token)
    assert queued(conn, "ann@example.com", "verify") == 2
    assert _metric(client, RESEND_METRIC, "verify") == 1
    assert held_redirect.headers["Location"] == sent_redirect.headers["Location"]
    assert text_of(held) == text_of(sent)


def test_the_page_says_issuing_a_link_retires_the_older_ones_not_opening_it(
    client, conn, svc, clock
):
    _, page = _resend(client, _expired_verify_link(conn, svc, clock))
    assert "opening it" not in text_of(page)
    assert "Sending a new link makes the older ones stop working" in text_of(page)


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(45, "45 seconds"), (1800, "30 minutes"), (3600, "1 hour"), (5400, "1 hour and 30 minutes"),
     (86400, "24 hours"), (90000, "25 hours"), (172800, "2 days"), (183600, "2 days and 3 hours"),
     (0, "0 seconds")],
)
def test_durations_are_said_one_way(seconds, said):
    assert describe_duration(seconds) == said


@pytest.mark.parametrize("purpose", ["verify", "reset"])
def test_the_page_and_the_email_give_a_link_the_same_lifetime(client, settings, svc, purpose):
    """The page said "24 hours" and the email "1 day" for the same link (issue 10)."""
    sent = "signup" if purpose == "verify" else "reset"
    page = text_of(client.get(f"/check-email?sent={sent}"))
    now = datetime.now(UTC)
    job = ClaimedJob(
        id=1, public_id=uuid4(), template=purpose, recipient="ann@example.com", payload={},
        user_id=7,
        purpose=purpose, token_version=1, issued_at=now, attempt_count=1, lease_owner="h:1:x",
        lease_expires_at=now, current_version=1, ambiguous_before=False,
    )
    _headers, email_text, _html = renderer(settings).parts(job)
    lifetime = describe_duration(svc.tokens.ttl(purpose))
    assert lifetime == {"verify": "24 hours", "reset": "30 minutes"}[purpose]  # the defaults
    assert f"It expires in {lifetime}." in page
    assert f"valid for {lifetime} and" in " ".join(email_text.split())


def test_unknown_path_is_a_page_in_the_site_frame(client):
    page = client.get("/no/such/page")
    assert page.status_code == 404
    assert page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert 'class="site-header"' in html and "pages.css" in html
    assert "Page not found" in text_of(page)


def test_wrong_method_is_a_page_in_the_site_frame_with_allow(client):
    page = client.put("/signup")
    assert page.status_code == 405
    assert 'class="site-header"' in page.get_data(as_text=True)
    assert "Not allowed here" in text_of(page)
    assert set(page.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}


def test_api_paths_keep_answering_problems(app_with):
    # The test inbox's (/_inbox) are its own server's: tests/test_inbox_api.py.
    client = app_with(AUTHSVC_TEST_INBOX="on").test_client()
    answer = client.get("/api/v1/no-such-thing")
    assert answer.status_code == 404
    assert answer.mimetype == "application/problem+json"
    assert client.delete("/api/v1/signups").mimetype == "application/problem+json"
