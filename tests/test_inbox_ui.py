"""The test inbox's pages, rendered by its HTTP server (the browser tests drive them too)."""

from __future__ import annotations

import re
import smtplib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from authsvc.accounts import actions, deletion, email_change
from authsvc.inbox.parsing import find_code
from authsvc.services import Services
from authsvc.worker import jobs
from tests.inbox_support import (
    HttpClient,
    email,
    send,
)
from tests.inbox_ui_support import links_in_each_state, send_links_email
from tests.link_support import latest_claims, latest_link
from tests.pages_support import PASSWORD, make_account
from tests.worker_support import renderer


def _message_id(inbox: HttpClient, scope: str) -> int:
    return int(inbox.get(f"/_inbox/scopes/{scope}/expect-one?settle=0").json["message"]["id"])


def test_the_index_lists_recent_scopes_and_allows_only_its_own_script(inbox, sink):
    send(sink.port, email("alice+ui1@inbox.test", subject="Hello <b>there</b>"))
    page = inbox.get("/_inbox/")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert 'href="/_inbox/ui/scopes/ui1"' in html
    assert "Hello &lt;b&gt;there&lt;/b&gt;" in html
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert re.findall(r"<script[^>]*>", html) == [
        '<script src="/_inbox/static/live.js" defer>'
    ]
    assert inbox.get("/_inbox/static/live.js").status_code == 200
    assert "cdn" not in html.lower()


def test_open_a_scope_redirects_and_names_a_bad_scope(inbox):
    assert inbox.get("/_inbox/ui/open?scope=Run42").headers["Location"].endswith(
        "/_inbox/ui/scopes/run42"
    )
    bad = inbox.get("/_inbox/ui/open?scope=a%20b")
    assert bad.status_code == 400 and 'aria-invalid="true"' in bad.get_data(as_text=True)


def test_the_scope_page_marks_resends_and_filters(inbox, sink):
    for subject in ("first", "again"):
        send(sink.port, email("dup@inbox.test", subject=subject, message_id="<authsvc-job-9@h>"))
    send(sink.port, email("bob+dup@inbox.test", subject="other"))
    html = inbox.get("/_inbox/ui/scopes/dup").get_data(as_text=True)
    assert html.count("re-send of #") == 1
    filtered = inbox.get("/_inbox/ui/scopes/dup?to=bob").get_data(as_text=True)
    assert ">other<" in filtered and ">first<" not in filtered


def test_the_message_page_shows_link_states_without_consuming_them(
    inbox, sink, conn, svc: Services
):
    links = links_in_each_state(conn, svc)
    send_links_email(sink.port, "states", links)
    inbox_id = _message_id(inbox, "states")
    for _ in range(2):  # reading twice changes nothing
        html = inbox.get(f"/_inbox/ui/scopes/states/messages/{inbox_id}").get_data(as_text=True)
        states = re.findall(r'data-state="([a-z_]+)"', html)
        assert states == ["used", "superseded", "would_redeem"]
    assert '<p class="code" id="code">123456</p>' in html
    # Same origin only, so the page can read the email's height; never scripts, forms or popups.
    assert re.search(r'<iframe[^>]*\ssandbox="allow-same-origin"\s', html)
    assert "allow-scripts" not in html and "allow-forms" not in html
    assert f"/_inbox/scopes/states/messages/{inbox_id}/raw" in html
    framed = inbox.get(f"/_inbox/ui/scopes/states/messages/{inbox_id}/html")
    policy = framed.headers["Content-Security-Policy"]
    assert policy.startswith("sandbox allow-same-origin;") and "default-src 'none'" in policy
    assert "script-src" not in policy and "allow-scripts" not in policy
    assert framed.headers["X-Frame-Options"] == "SAMEORIGIN"


def test_an_expired_link_shows_as_expired(inbox, sink, conn, svc, clock):
    links = links_in_each_state(conn, svc)
    send_links_email(sink.port, "old", {"would_redeem": links["would_redeem"]})
    clock.advance(svc.settings.reset_ttl + 1)
    html = inbox.get(f"/_inbox/ui/scopes/old/messages/{_message_id(inbox, 'old')}").get_data(
        as_text=True
    )
    assert re.findall(r'data-state="([a-z_]+)"', html) == ["expired"]


def test_links_elsewhere_have_no_state_and_forged_ones_are_invalid(inbox, sink, svc):
    base = svc.settings.base_url
    text = f"https://other.example/verify?token=x {base}/verify?token=forged"
    send(sink.port, email("misc@inbox.test", text=text))
    html = inbox.get(f"/_inbox/ui/scopes/misc/messages/{_message_id(inbox, 'misc')}").get_data(
        as_text=True
    )
    assert re.findall(r'data-state="([a-z_]+)"', html) == ["invalid"]


def test_a_bad_scope_or_filter_on_a_page_is_a_problem_not_a_500(inbox):
    assert inbox.get("/_inbox/ui/scopes/a%20b").status_code == 404
    assert inbox.get("/_inbox/ui/scopes/abc/messages/1").status_code == 404
    bad = inbox.get("/_inbox/ui/scopes/abc?q=%00")
    assert bad.status_code == 400 and bad.json["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("text", "code"),
    [("Your code is 123456.", "123456"), ("no code 12345 or 1234567", None),
     ("order 2024-123456", None), (None, None),
     # Six digits inside a link's token are not the code that follows it.
     ("https://x.test/reset?token=WzEs.a859679b.Zx_\n\n    123456\n", "123456"),
     ("see https://x.test/859679/ then 123456", "123456"),
     ("id abc859679 and code 123456", "123456"),
     # Nor six digits in an address: a scope (32 hex digits) may start with them.
     ("Someone signed up with ann+482913ab0c@inbox.test.\n\n123456", "123456"),
     ("sent to 482913@example.com: 123456", "123456")],
)
def test_find_code(text, code):
    assert find_code(text) == code


@settings(max_examples=200, deadline=None)
@given(scope=st.text("0123456789abcdef", min_size=32, max_size=32),
       code=st.from_regex(r"\A[0-9]{6}\Z"))
def test_the_code_is_found_whatever_the_scope_in_the_address_above_it(scope, code):
    text = f"Someone (hopefully you) signed up with ann+{scope}@inbox.test.\n\n{code}\n"
    assert find_code(text) == code


def test_a_real_reset_email_shows_its_own_code(inbox, sink, conn, svc: Services, settings):
    """The UI picks the code out of the email authsvc's worker renders, not a look-alike."""
    address = "cody+realcode@inbox.test"
    actions.sign_up(conn, svc, email=address, password="correct horse battery")
    actions.request_password_reset(conn, svc, email=address)
    [job] = [j for j in jobs.claim_batch(conn, "ui-test", 10, 30) if j.template == "reset"]
    outgoing = renderer(settings).render(job)
    with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
        client.sendmail(outgoing.sender, [outgoing.recipient], outgoing.data)
    html = inbox.get(
        f"/_inbox/ui/scopes/realcode/messages/{_message_id(inbox, 'realcode')}"
    ).get_data(as_text=True)
    expected = svc.tokens.mint_code(latest_claims(conn, address, "reset"))
    assert f'<p class="code" id="code">{expected}</p>' in html


def test_the_link_states_know_address_changes_undos_and_deletions(inbox, sink, conn, svc):
    """SPEC §12's purposes read like the others: a superseded change link, an undo link
    that would redeem and one already used, a deletion link that would redeem."""
    base = svc.settings.base_url
    ann = make_account(conn, svc, "ann@example.com")
    email_change.request_email_change(conn, svc, email=ann, password=PASSWORD,
                                      new_email="first@example.com")
    superseded = latest_link(conn, svc, "first@example.com", "email_change")
    email_change.request_email_change(conn, svc, email=ann, password=PASSWORD,
                                      new_email="second@example.com")
    email_change.confirm_email_change(
        conn, svc, token=latest_link(conn, svc, "second@example.com", "email_change"))
    undo = latest_link(conn, svc, ann, "email_revert")
    deletion.request_account_deletion(conn, svc, email="second@example.com", password=PASSWORD)
    delete = latest_link(conn, svc, ann, "account_delete")  # an undo link lives: it went there
    send_links_email(sink.port, "life", {
        "superseded": f"{base}/email-change/confirm?token={superseded}",
        "undo": f"{base}/email-change/undo?token={undo}",
        "delete": f"{base}/account/delete?token={delete}",
    })
    html = inbox.get(f"/_inbox/ui/scopes/life/messages/{_message_id(inbox, 'life')}").get_data(
        as_text=True)
    assert re.findall(r'data-state="([a-z_]+)"', html) == [
        "superseded", "would_redeem", "would_redeem"]
    for purpose in ("email_change", "email_revert", "account_delete"):
        assert f"({purpose} link)" in html
    email_change.undo_email_change(conn, svc, token=undo, password="back again 1234")
    html = inbox.get(f"/_inbox/ui/scopes/life/messages/{_message_id(inbox, 'life')}").get_data(
        as_text=True)
    # The undo ended the pending deletion with every other link.
    assert re.findall(r'data-state="([a-z_]+)"', html) == ["superseded", "used", "superseded"]
