"""SPEC §12's emails and events, as their receivers see them.

The emails go through a real worker to an SMTP server in the test: each says
what happened, when its link expires, carries a code only where a code is
allowed, and the undo notice masks the new address. The events reach a real
webhook receiver for every app the account belongs to, signed as Standard
Webhooks, and a deleted account's event names no address.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from standardwebhooks import Webhook

from authsvc.accounts import deletion
from authsvc.apps.keys import set_webhook
from testkit.smtp_double import Received, SmtpDouble
from testkit.waiting import wait_until
from tests.address_life_support import (
    change_link,
    changed,
    confirmed,
    delete_link,
    request_change,
    undo_link,
    user_id_of,
)
from tests.api_support import SIGNUP_PASSWORD, ApiCaller, register_shop_app
from tests.webhook_support import register_webhook_app, serving, webhook_worker
from tests.worker_support import deliver_once_to, running, worker

PASSWORD = SIGNUP_PASSWORD
_CODE = re.compile(r"^\s*(\d{6})\s*$", re.MULTILINE)


def _link_path(message: Received) -> str:
    link = next(word for word in message.text.split() if "token=" in word)
    return urlsplit(link).path


def test_the_change_email_has_its_link_its_code_and_its_expiry(
    api, conn, svc, database_url, settings, smtp
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, PASSWORD, "new@example.com")
    message = deliver_once_to(database_url, settings, svc.clock, smtp, "new@example.com")

    assert message.subject == "Confirm your new email address"
    assert _link_path(message) == "/email-change/confirm"
    [code] = _CODE.findall(message.text)
    assert code in message.html
    assert "valid for 1 hour" in message.text and "expires at" in message.text
    assert "/email-change/code" in message.text
    assert ann not in message.text  # the new mailbox learns nothing of the old address


def test_the_undo_notice_masks_the_new_address_and_carries_the_undo_link_without_a_code(
    api, conn, svc, database_url, settings, smtp
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    changed(api, conn, svc, ann, PASSWORD, "nadia@example.net")
    message = deliver_once_to(database_url, settings, svc.clock, smtp, ann)

    assert message.subject == "Your account's email address was changed"
    assert "n\u2022\u2022\u2022@example.net" in message.text
    assert "n\u2022\u2022\u2022@example.net" in message.html
    assert "nadia@example.net" not in message.text + message.html
    assert _link_path(message) == "/email-change/undo"
    assert _CODE.findall(message.text) == []
    assert "valid for 7 days" in message.text


def test_the_restored_notice_and_the_reset_after_an_undo(
    api, conn, svc, database_url, settings, smtp
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    undo = changed(api, conn, svc, ann, PASSWORD, "new@example.com")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    sent_before = len(smtp.messages)
    assert api.post("/email-changes/undo", {"token": undo}).status_code == 200
    notice = deliver_once_to(database_url, settings, svc.clock, smtp, "new@example.com")
    reset = [m for m in smtp.messages[sent_before:] if m.rcpt_tos == [ann]]

    assert len(smtp.messages) - sent_before == 2  # what expect-one sees: one in each mailbox
    assert notice.subject == "This address no longer signs in to your account"
    assert "a\u2022\u2022\u2022@example.com" in notice.text
    assert [m.subject for m in reset] == ["Reset your password"]
    assert _link_path(reset[0]) == "/reset/confirm"


def test_the_already_used_notice_goes_to_the_holder_and_says_nothing_changed(
    api, conn, svc, database_url, settings, smtp
):
    confirmed(api, conn, svc, "holder@example.com")
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, PASSWORD, "holder@example.com")
    message = deliver_once_to(database_url, settings, svc.clock, smtp, "holder@example.com")

    assert message.subject == "An account already uses this address"
    assert "nothing changed" in message.text
    assert "token=" not in message.text and _CODE.findall(message.text) == []
    assert ann not in message.text  # who asked stays private


def test_the_deletion_email_says_it_cannot_be_undone(api, conn, svc, database_url, settings, smtp):
    ann = confirmed(api, conn, svc, "ann@example.com")
    assert api.post("/account-deletions", {"email": ann, "password": PASSWORD}).status_code == 202
    message = deliver_once_to(database_url, settings, svc.clock, smtp, ann)

    assert message.subject == "Confirm deleting your account"
    assert _link_path(message) == "/account/delete"
    assert len(_CODE.findall(message.text)) == 1
    assert "cannot be undone" in message.text and "valid for 1 hour" in message.text
    assert "/account/delete/code" in message.text


def test_an_apps_change_link_opens_its_redirect_only_for_its_own_account(
    api, conn, svc, database_url, settings, smtp
):
    ann = confirmed(api, conn, svc, "ann@example.com")  # the shop's account
    body = {"email": ann, "password": PASSWORD, "new_email": "new@example.com",
            "redirect_url": "https://allowed.example.com/welcome"}
    assert api.post("/email-changes", body).status_code == 202
    message = deliver_once_to(database_url, settings, svc.clock, smtp, "new@example.com")
    assert _link_path(message) == "/welcome"

    other_app, key = register_shop_app(conn, "other")
    other = ApiCaller(api.client, other_app, key)
    # The shop's redirect is on the other app's allowlist too; the account is not the other's.
    assert other.post("/email-changes", body).status_code == 202
    message = deliver_once_to(database_url, settings, svc.clock, smtp, "new@example.com")
    assert _link_path(message) == "/email-change/confirm"
    assert "Requested through the app \u201cother\u201d" in message.text


# --- events ----------------------------------------------------------------------------

def _user_events(receiver, secret: str) -> list[dict]:
    verifier = Webhook(secret)
    return [verifier.verify(r.body, r.headers) for r in receiver.requests
            if r.path == "/hooks/authsvc"]


def test_every_app_the_account_belongs_to_hears_the_change_the_undo_and_the_deletion(
    client, conn, svc, settings, clock, database_url
):
    with serving() as receiver, running(webhook_worker(database_url, settings, clock)):
        shop, key, secret = register_webhook_app(conn, settings, receiver.url)
        api = ApiCaller(client, shop, key)
        ann = confirmed(api, conn, svc, "ann@example.com")
        user_id = str(user_id_of(conn, ann))
        undo = changed(api, conn, svc, ann, PASSWORD, "new@example.com")
        assert api.post("/email-changes/undo", {"token": undo, "password": "back again 88"}
                        ).status_code == 200

        def types() -> list[str]:
            return [e["type"] for e in _user_events(receiver, secret)
                    if e["type"].startswith("user.")]

        # A deletion drops the account's pending jobs, events in flight included
        # (SPEC §12): the first two events must be delivered and recorded first.
        wait_until(lambda: conn.execute(
            "SELECT count(*) FROM email_jobs WHERE kind = 'webhook' AND status = 'sent'"
            " AND payload->'event'->>'type' IN ('user.email_changed', 'user.email_restored')"
        ).fetchone()[0] == 2, what="the change and the undo events sent")
        assert api.post("/account-deletions",
                        {"email": ann, "password": "back again 88"}).status_code == 202
        assert api.post("/account-deletions/confirm",
                        {"token": delete_link(conn, svc, ann)}).status_code == 200
        wait_until(lambda: "user.deleted" in types(), what="the deletion event")
        assert sorted(types()) == ["user.deleted", "user.email_changed", "user.email_restored",
                                   "user.verified"]
    events = {e["type"]: e["data"] for e in _user_events(receiver, secret)}
    assert events["user.email_changed"] == {
        "user": {"id": user_id, "email": "new@example.com"},
        "user_id": user_id, "email": "new@example.com", "previous_email": ann}
    assert events["user.email_restored"] == {
        "user": {"id": user_id, "email": ann},
        "user_id": user_id, "email": ann, "previous_email": "new@example.com"}
    assert events["user.deleted"] == {"user": {"id": user_id}, "user_id": user_id}
    # The delivered events stay in the outbox, without the addresses they named.
    rows = conn.execute("SELECT payload::text FROM email_jobs WHERE kind = 'webhook'").fetchall()
    assert rows and not any("example.com" in r[0] for r in rows)
    digest = deletion.address_digest(settings.secret_keys, ann)
    assert any(digest in r[0] for r in rows)


def test_an_app_the_account_does_not_belong_to_hears_nothing(
    client, conn, svc, settings, clock, database_url
):
    with serving() as receiver, running(webhook_worker(database_url, settings, clock)):
        shop, key, _secret = register_webhook_app(conn, settings, receiver.url)
        outsider, outsider_key = register_shop_app(conn, "outsider")
        set_webhook(conn, outsider.id, receiver.url.replace("/hooks/authsvc", "/outsider"),
                    settings.secret_keys)
        ann = confirmed(ApiCaller(client, shop, key), conn, svc, "ann@example.com")
        # The outsider's key is used for the whole flow: the account is still only the shop's.
        changed(ApiCaller(client, outsider, outsider_key), conn, svc, ann, PASSWORD,
                "new@example.com")
        wait_until(lambda: any(r.path == "/hooks/authsvc" and b"user.email_changed" in r.body
                               for r in receiver.requests), what="the shop's event")
    assert not any(r.path == "/outsider" and b"user." in r.body for r in receiver.requests)


def test_a_pending_change_email_is_not_sent_once_superseded(
    api, conn, svc, database_url, settings, smtp: SmtpDouble
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, PASSWORD, "first@example.com")
    first = change_link(conn, svc, "first@example.com")
    request_change(api, ann, PASSWORD, "second@example.com")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    assert [m.rcpt_tos for m in smtp.messages][-1:] == [["second@example.com"]]
    assert first not in "".join(m.text for m in smtp.messages)
    statuses = dict(conn.execute(
        "SELECT recipient, status FROM email_jobs WHERE purpose = 'email_change'").fetchall())
    assert statuses == {"first@example.com": "superseded", "second@example.com": "sent"}


def test_an_undo_notice_is_not_sent_once_an_older_undo_voided_its_link(
    api, conn, svc, database_url, settings, smtp: SmtpDouble
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    first_undo = changed(api, conn, svc, ann, PASSWORD, "second@example.com")
    changed(api, conn, svc, "second@example.com", PASSWORD, "third@example.com")
    assert undo_link(conn, svc, "second@example.com")
    assert api.post("/email-changes/undo", {"token": first_undo, "password": "back 123456"}
                    ).status_code == 200
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    statuses = [r[0] for r in conn.execute(
        "SELECT status FROM email_jobs WHERE purpose = 'email_revert' ORDER BY id")]
    # Neither notice had gone out: the first change's link was used (undone), the
    # second's voided by it. A notice whose undo link cannot work is not sent.
    assert statuses == ["superseded", "superseded"]
