"""SPEC §10: every provider's bounce and complaint notifications, against its fake.

Each fake (tools/local_*.py) writes notifications the way its provider
does — Svix signatures, basic or bearer credentials, SNS RSA signatures
over a certificate it serves, ECDSA, HMAC — and each is checked here to
suppress what it should and nothing else. An attacker who can reach the
endpoint must not be able to silence an address: every refusal (forged,
missing or stale, a replayed id, an SNS certificate or SubscribeURL off
Amazon's hosts, a topic nobody configured) is checked to change nothing,
and to say why in the log.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from authsvc.bounces.provider_notifications import READERS
from authsvc.bounces.providers.ses import SesReader
from authsvc.bounces.sns import SnsFetcher
from tests.api_support import assert_problem
from tests.provider_support import FAKES, running_fake
from tests.worker_support import queue_notices, sent_after_a_dropped_answer
from tools.local_brevo import LocalBrevo
from tools.local_mailgun import LocalMailgun
from tools.local_postmark import LocalPostmark
from tools.local_provider import SAMPLE_JOB, LocalProvider, Notification, basic_auth
from tools.local_resend import LocalResend
from tools.local_sendgrid import LocalSendgrid
from tools.local_ses import LocalSes

every_provider = pytest.mark.parametrize("name", list(FAKES))
# The id each fake's notifications name by default, as its send answer gave it.
SENT_IDS = {
    "resend": "4ef9a417-02e9-4d39-ad75-9611e0fcc33c",
    "postmark": "883953f4-6105-42a2-a16a-77a8eac79483",
    "ses": "0100018c-ses-message-id",
    "sendgrid": "14c5d75ce93dfb1ab2e2",
    "mailgun": "<20261201080000.1a2b3c4d@mg.example.com>",
    "brevo": "<202612010800.5787683@smtp-relay.mailin.fr>",
}
OTHER_WHSEC = "whsec_" + base64.b64encode(b"someone-else-entirely-32-bytes!").decode()


@pytest.fixture
def fake(name: str) -> Iterator[LocalProvider]:
    with FAKES[name]() as running:
        yield running


def _app(app_with, fake: LocalProvider, **extra: str):
    app = app_with(**fake.webhook_settings(), **extra)
    if isinstance(fake, LocalSes):
        # The certificate URL names sns.us-east-1.amazonaws.com; this test's
        # "network" routes that pinned host to the fake (the pin is still checked).
        app.extensions[READERS]["ses"] = SesReader(
            (fake.topic_arn,), SnsFetcher(route_to=fake.origin))
    return app


@pytest.fixture
def hook(app_with, fake):
    return _app(app_with, fake).test_client()


def _sent(conn, address: str, message_id: str, public_id: str = SAMPLE_JOB) -> str:
    """A job authsvc sent to `address`, taken by the provider as `message_id`."""
    conn.execute(
        "INSERT INTO email_jobs (template, recipient, status, sent_at, provider_message_id,"
        " public_id) VALUES ('no_account', %s, 'sent', now(), %s, %s)",
        (address, message_id, public_id))
    return public_id


def _post(hook, name: str, notification: Notification):
    return hook.post(f"/webhooks/provider/{name}", data=notification.body,
                     headers=notification.headers)


def _state(conn) -> tuple[list, list]:
    return (conn.execute("SELECT address, event, provider FROM suppressions ORDER BY 1"
                         ).fetchall(),
            conn.execute("SELECT message_id FROM provider_webhook_messages").fetchall())


def _refused(hook, name: str, notification: Notification, conn, caplog, why: str) -> None:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        response = _post(hook, name, notification)
    assert_problem(response, 401, "invalid_signature")
    assert _state(conn) == ([], []), "a refused notification changed something"
    reasons = [getattr(r, "error", "") for r in caplog.records
               if r.msg == "provider_webhook_refused"]
    assert reasons and why in reasons[0], reasons


@every_provider
def test_a_hard_bounce_suppresses_the_address(hook, fake, conn, name):
    _sent(conn, "gone@example.com", SENT_IDS[name])
    response = _post(hook, name, fake.bounce("Gone@Example.com"))
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json() == {"received": True, "suppressed": 1}
    [(address, event, provider)] = _state(conn)[0]
    assert (address, provider) == ("gone@example.com", name)
    assert any(word in event.lower() for word in ("bounce", "failed/permanent"))


@every_provider
def test_a_complaint_suppresses_the_address(hook, fake, conn, name):
    _sent(conn, "angry@example.com", SENT_IDS[name])
    assert _post(hook, name, fake.complaint("angry@example.com")).status_code == 200
    assert [row[0] for row in _state(conn)[0]] == ["angry@example.com"]


@every_provider
def test_soft_bounces_and_deliveries_suppress_nothing(hook, fake, conn, name):
    _sent(conn, "full@example.com", SENT_IDS[name])
    _sent(conn, "fine@example.com", SENT_IDS[name])
    for notification in (fake.bounce("full@example.com", hard=False),
                         fake.delivery("fine@example.com")):
        response = _post(hook, name, notification)
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.get_json()["suppressed"] == 0
    assert _state(conn)[0] == []


@every_provider
def test_a_replayed_notification_changes_nothing(hook, fake, conn, name):
    _sent(conn, "gone@example.com", SENT_IDS[name])
    notification = fake.bounce("gone@example.com")
    assert _post(hook, name, notification).status_code == 200
    conn.execute("DELETE FROM suppressions")  # the operator lifted it since
    again = _post(hook, name, notification)  # the captured request, sent again
    assert again.status_code == 200
    assert again.get_json() == {"received": True, "duplicate": True, "suppressed": 0}
    assert _state(conn)[0] == []


@every_provider
def test_without_its_setting_a_providers_endpoint_does_not_exist(client, fake, conn, name):
    response = _post(client, name, fake.bounce("gone@example.com"))
    assert_problem(response, 404, "not_found")
    assert _state(conn) == ([], [])


def _other_keys(name: str) -> LocalProvider:
    """The same provider with someone else's secrets: its notifications forge ours."""
    return {
        "resend": lambda: LocalResend(webhook_secret=OTHER_WHSEC),
        "postmark": lambda: LocalPostmark(webhook_password="guessed-password-123"),
        "ses": lambda: LocalSes(),  # another RSA key, its certificate served elsewhere
        "sendgrid": lambda: LocalSendgrid(),
        "mailgun": lambda: LocalMailgun(signing_key="someone-elses-signing-key-0000"),
        "brevo": lambda: LocalBrevo(webhook_token="guessed-brevo-token-0000000"),
    }[name]()


@every_provider
def test_a_notification_under_someone_elses_key_is_refused(hook, fake, conn, caplog, name):
    forger = _other_keys(name)
    with forger:
        if isinstance(fake, LocalSes) and isinstance(forger, LocalSes):
            # Signed with the forger's key, naming the genuine certificate (only
            # Amazon's host passes the pin).
            genuine = f"https://{fake.sns_host}{fake.certificate_path}"
            notification = forger.bounce("victim@example.com", certificate_url=genuine)
        else:
            notification = forger.bounce("victim@example.com")
    why = {"resend": "No matching signature", "postmark": "wrong credentials",
           "ses": "does not verify", "sendgrid": "does not verify",
           "mailgun": "does not verify", "brevo": "wrong credentials"}[name]
    _refused(hook, name, notification, conn, caplog, why)


def _strip_credentials(name: str, notification: Notification) -> Notification:
    headers = dict(notification.headers)
    body = notification.body
    if name == "resend":
        del headers["svix-signature"]
    elif name in ("postmark", "brevo"):
        del headers["Authorization"]
    elif name == "sendgrid":
        del headers["X-Twilio-Email-Event-Webhook-Signature"]
    elif name == "mailgun":
        document = json.loads(body)
        del document["signature"]
        body = json.dumps(document).encode()
    elif name == "ses":
        document = json.loads(body)
        del document["Signature"]
        body = json.dumps(document).encode()
    return Notification(body, headers)


@every_provider
def test_a_notification_without_its_signature_or_credentials_is_refused(hook, fake, conn,
                                                                        caplog, name):
    notification = _strip_credentials(name, fake.bounce("victim@example.com"))
    why = {"resend": "Missing required headers", "postmark": "no basic credentials",
           "ses": "Signature is missing", "sendgrid": "no signature", "mailgun": "no signature",
           "brevo": "no bearer token"}[name]
    _refused(hook, name, notification, conn, caplog, why)


@pytest.mark.parametrize("name", ["resend", "ses", "sendgrid", "mailgun"])
def test_a_signed_notification_with_another_address_put_in_is_refused(hook, fake, conn, caplog,
                                                                       name):
    notification = fake.bounce("gone@example.com")
    if name == "mailgun":
        # Mailgun signs the timestamp and token only: an event changed under
        # a fresh token is answered by the message check (the tests below).
        # Here, the signature is altered.
        document = json.loads(notification.body)
        document["signature"]["token"] += "0"
        tampered = json.dumps(document).encode()
    else:
        tampered = notification.body.replace(b"gone@example.com", b"victim@example.com")
    why = {"resend": "No matching signature", "ses": "does not verify",
           "sendgrid": "does not verify", "mailgun": "does not verify"}[name]
    _refused(hook, name, Notification(tampered, notification.headers), conn, caplog, why)


def test_a_mailgun_token_is_used_once_even_with_another_event(app_with, conn):
    with LocalMailgun() as fake:
        hook = _app(app_with, fake).test_client()
        _sent(conn, "gone@example.com", SENT_IDS["mailgun"])
        _sent(conn, "victim@example.com", SENT_IDS["mailgun"])
        first = fake.bounce("gone@example.com")
        signature = json.loads(first.body)["signature"]
        assert _post(hook, "mailgun", first).status_code == 200
        conn.execute("DELETE FROM suppressions")
        # The captured signature, moved onto another event: it still verifies.
        other = json.loads(fake.bounce("victim@example.com").body)
        other["signature"] = signature
        again = _post(hook, "mailgun", Notification(json.dumps(other).encode(), first.headers))
    assert again.get_json() == {"received": True, "duplicate": True, "suppressed": 0}
    assert _state(conn)[0] == []


def _unmatched(hook, name: str, notification: Notification, conn, caplog) -> None:
    """A verified notification that names no message authsvc sent there: acknowledged,
    nothing suppressed, and the log says why."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        response = _post(hook, name, notification)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json() == {"received": True, "suppressed": 0}
    assert _state(conn)[0] == [], "a notification of no message of ours suppressed"
    reasons = [getattr(r, "error", "") for r in caplog.records
               if r.msg == "provider_webhook_unmatched"]
    assert reasons and "no message" in reasons[0], reasons


def test_a_signed_mailgun_event_of_the_forgers_making_suppresses_nothing(app_with, conn,
                                                                          caplog):
    """Mailgun's signature covers only its timestamp and token, and its signing key is
    the account's: anyone holding a fresh signed triple (another endpoint of the same
    account sees them) can attach any event. Only an event naming a message authsvc
    sent to that very recipient suppresses."""
    with LocalMailgun() as fake:
        hook = _app(app_with, fake).test_client()
        job = _sent(conn, "gone@example.com", SENT_IDS["mailgun"], str(uuid.uuid4()))
        forged_id = "<20261201080000.forged00@mg.example.com>"
        for forged in (
            fake.bounce("victim@example.com"),  # nothing of ours at all
            fake.bounce("victim@example.com", message_id=SENT_IDS["mailgun"], job=job),
            fake.bounce("gone@example.com", message_id=forged_id, job=job),
            fake.bounce("gone@example.com", message_id=SENT_IDS["mailgun"],
                        job=str(uuid.uuid4())),
            fake.bounce("gone@example.com", message_id=SENT_IDS["mailgun"], job=None),
            fake.complaint("victim@example.com", message_id=SENT_IDS["mailgun"], job=job),
        ):
            _unmatched(hook, "mailgun", forged, conn, caplog)
        real = _post(hook, "mailgun",
                     fake.bounce("gone@example.com", message_id=SENT_IDS["mailgun"], job=job))
        assert real.get_json() == {"received": True, "suppressed": 1}


@every_provider
def test_a_notification_of_a_message_never_sent_to_that_address_suppresses_nothing(
        hook, fake, conn, caplog, name):
    _sent(conn, "gone@example.com", SENT_IDS[name])
    for other in (fake.bounce("victim@example.com"),  # our message, another recipient
                  fake.bounce("gone@example.com", message_id=_another_id(name)),
                  fake.complaint("victim@example.com")):
        _unmatched(hook, name, other, conn, caplog)


def test_a_brevo_event_names_its_job_even_when_the_send_recorded_no_message_id(app_with,
                                                                              conn, caplog):
    """A send answered "key already used" records the key, not Brevo's messageId: the
    job's public id, sent in X-Mailin-custom and echoed by every event, names it."""
    with LocalBrevo() as fake:
        hook = _app(app_with, fake).test_client()
        job = _sent(conn, "gone@example.com", str(uuid.uuid4()), str(uuid.uuid4()))
        for other in (fake.bounce("gone@example.com", job=str(uuid.uuid4())),
                      fake.bounce("victim@example.com", job=job)):
            _unmatched(hook, "brevo", other, conn, caplog)
        real = _post(hook, "brevo", fake.bounce("gone@example.com", job=job))
        assert real.get_json() == {"received": True, "suppressed": 1}


def test_a_brevo_job_sent_under_a_used_key_is_matched_by_its_bounce(app_with, conn, pool,
                                                                    settings):
    """End to end: the first answer lost, the retry refused as a used key (sent, but no
    messageId); Brevo's bounce of the message still suppresses its recipient."""
    [job_id] = queue_notices(conn, 1)
    with running_fake("brevo") as case:
        sent_after_a_dropped_answer(conn, pool, settings, case, job_id)
        [delivered] = case.fake.snapshot()
        recipient, recorded = conn.execute(
            "SELECT recipient, provider_message_id FROM email_jobs WHERE id = %s",
            (job_id,)).fetchone()
        assert recorded != delivered.id  # Brevo's duplicate answer names no message
        assert isinstance(case.fake, LocalBrevo)
        hook = _app(app_with, case.fake).test_client()
        bounce = case.fake.bounce(recipient, message_id=delivered.id,
                                  job=delivered.body["headers"]["X-Mailin-custom"])
        response = _post(hook, "brevo", bounce)
    assert response.get_json() == {"received": True, "suppressed": 1}


def test_a_notification_about_an_email_older_than_its_window_suppresses_nothing(
        app_with, conn, caplog):
    with LocalPostmark() as fake:
        hook = _app(app_with, fake).test_client()
        _sent(conn, "gone@example.com", SENT_IDS["postmark"])
        conn.execute("UPDATE email_jobs SET created_at = now() - interval '40 days',"
                     " sent_at = now() - interval '31 days'")
        _unmatched(hook, "postmark", fake.bounce("gone@example.com"), conn, caplog)


def test_the_window_runs_from_the_send_not_the_queueing(app_with, conn):
    """A job queued long ago and sent yesterday (redriven, or retried for weeks):
    its bounce is about mail sent yesterday."""
    with LocalPostmark() as fake:
        hook = _app(app_with, fake).test_client()
        _sent(conn, "late@example.com", SENT_IDS["postmark"])
        conn.execute("UPDATE email_jobs SET created_at = now() - interval '40 days',"
                     " sent_at = now() - interval '1 day'")
        response = _post(hook, "postmark", fake.bounce("late@example.com"))
    assert response.get_json() == {"received": True, "suppressed": 1}


def _another_id(name: str) -> str:
    sent = SENT_IDS[name]
    return sent.replace("1", "2") if name != "ses" else sent + "-2"


def _stale(name: str, fake: LocalProvider) -> Notification:
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=13)
    if isinstance(fake, LocalResend):
        return fake.event("email.bounced", {"to": ["gone@example.com"]},
                          when=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10))
    if isinstance(fake, LocalPostmark):
        return fake.bounce("gone@example.com", bounced_at=long_ago.isoformat())
    if isinstance(fake, LocalSes):
        return fake.bounce("gone@example.com", timestamp=long_ago)
    if isinstance(fake, LocalSendgrid):
        return fake.events([fake.event("bounce", "gone@example.com", "m1", type="bounce")],
                           timestamp=int(time.time()) - 600)
    if isinstance(fake, LocalMailgun):
        return fake.event({"event": "failed", "severity": "permanent",
                           "recipient": "gone@example.com"}, timestamp=int(time.time()) - 600)
    assert isinstance(fake, LocalBrevo)
    record = json.loads(fake.bounce("gone@example.com").body)
    record["ts_epoch"] = int(long_ago.timestamp() * 1000)
    return Notification(json.dumps(record).encode(), fake.bounce("x@example.com").headers)


@every_provider
def test_a_notification_outside_its_time_window_is_refused(hook, fake, conn, caplog, name):
    why = "too old" if name == "resend" else "old"
    _refused(hook, name, _stale(name, fake), conn, caplog, why)


def test_a_sendgrid_batch_suppresses_each_hard_event_and_replays_as_one(app_with, conn):
    with LocalSendgrid() as fake:
        hook = _app(app_with, fake).test_client()
        for address, message_id in (("gone@example.com", "m1"), ("busy@example.com", "m2"),
                                    ("angry@example.com", "m3"), ("known@example.com", "m4"),
                                    ("reader@example.com", "m5")):
            _sent(conn, address, message_id)
        batch = fake.events([
            fake.event("bounce", "gone@example.com", "m1", type="bounce"),
            fake.event("bounce", "busy@example.com", "m2", type="blocked"),
            fake.event("spamreport", "angry@example.com", "m3"),
            fake.event("dropped", "known@example.com", "m4", reason="Bounced Address"),
            fake.event("open", "reader@example.com", "m5"),
        ])
        response = _post(hook, "sendgrid", batch)
        assert response.get_json() == {"received": True, "suppressed": 3}
        conn.execute("DELETE FROM suppressions")
        assert _post(hook, "sendgrid", batch).get_json()["duplicate"] is True
    assert _state(conn)[0] == []


def test_postmark_takes_a_bearer_token_instead_of_basic_credentials(app_with, conn):
    with LocalPostmark() as fake:
        token = "postmark-custom-header-token-1"
        hook = app_with(AUTHSVC_POSTMARK_WEBHOOK_AUTH=token).test_client()
        _sent(conn, "gone@example.com", SENT_IDS["postmark"])
        bounce = fake.bounce("gone@example.com")
        wrong = _post(hook, "postmark", bounce)  # basic credentials, a token expected
        assert wrong.status_code == 401
        headers = {**bounce.headers, "Authorization": f"Bearer {token}"}
        assert _post(hook, "postmark", Notification(bounce.body, headers)).status_code == 200
    assert [row[0] for row in _state(conn)[0]] == ["gone@example.com"]


def test_basic_credentials_that_only_start_right_are_refused(app_with, conn, caplog):
    with LocalBrevo() as fake:
        hook = app_with(AUTHSVC_BREVO_WEBHOOK_AUTH="brevo:right-password-0001").test_client()
        bounce = fake.bounce("gone@example.com")
        for presented in ("brevo:right-password-000", "brevo:right-password-00011",
                          "brevo:right-password-0001\x00"):
            headers = {**bounce.headers, "Authorization": basic_auth(*presented.split(":"))}
            _refused(hook, "brevo", Notification(bounce.body, headers), conn, caplog,
                     "wrong credentials")


# SES through SNS: the URLs a message names are pinned to Amazon's hosts.
OFF_HOST_CERTIFICATES = [
    "https://evil.example/SimpleNotificationService-1.pem",
    "https://sns.us-east-1.amazonaws.com.evil.example/SimpleNotificationService-1.pem",
    "https://evil.example/sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "http://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://sns.us-east-1.amazonaws.com:8443/SimpleNotificationService-1.pem",
    "https://sns.us-east-1.amazonaws.com@evil.example/SimpleNotificationService-1.pem",
    "https://user@sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
    "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-1.pem",  # not the topic's
    "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.txt",
    "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem?x=1",
    "https://sns.us-east-1.amazonaws.com\\@evil.example/a.pem",
]


@pytest.mark.parametrize("url", OFF_HOST_CERTIFICATES)
def test_an_sns_certificate_url_off_amazons_hosts_is_never_fetched(app_with, conn, caplog, url):
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        notification = fake.bounce("victim@example.com", certificate_url=url)
        _refused(hook, "ses", notification, conn, caplog, "SigningCertURL")
        assert fake.other_requests == [], "a certificate was fetched"


def test_an_sns_message_of_a_topic_nobody_configured_is_refused_before_any_fetch(
        app_with, conn, caplog):
    """SNS signs every topic alike: anyone's own topic could subscribe this URL."""
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        theirs = "arn:aws:sns:us-east-1:999999999999:attackers-topic"
        notification = fake.bounce("victim@example.com", topic_arn=theirs)
        _refused(hook, "ses", notification, conn, caplog, "is not one of")
        assert fake.other_requests == []


def test_an_sns_subscription_is_confirmed_once_through_its_pinned_url(app_with, conn):
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        confirmation = fake.subscription_confirmation()
        response = _post(hook, "ses", confirmation)
        assert response.status_code == 200, response.get_data(as_text=True)
        assert len(fake.confirmations) == 1
        assert fake.confirmations[0]["TopicArn"] == [fake.topic_arn]
        assert _post(hook, "ses", confirmation).get_json()["duplicate"] is True
        assert len(fake.confirmations) == 1
    assert _state(conn)[0] == []


@pytest.mark.parametrize("url", [
    "https://evil.example/?Action=ConfirmSubscription&TopicArn={arn}&Token=t",
    "http://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn={arn}&Token=t",
    "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=arn:aws:sns:"
    "us-east-1:999999999999:other&Token=t",
    "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&TopicArn={arn}&Token=t",
    "https://sns.us-east-1.amazonaws.com/redirect?Action=ConfirmSubscription&TopicArn={arn}"
    "&Token=t",
])
def test_a_subscribe_url_anywhere_else_is_never_fetched(app_with, conn, caplog, url):
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        confirmation = fake.subscription_confirmation(
            subscribe_url=url.format(arn=fake.topic_arn))
        _refused(hook, "ses", confirmation, conn, caplog, "SubscribeURL")
        assert fake.confirmations == []
        assert [r.path for r in fake.other_requests] == [fake.certificate_path]


def test_a_failed_confirmation_is_not_remembered_so_snss_retry_confirms(app_with, conn):
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        confirmation = fake.subscription_confirmation()
        fake.confirm_status = 500
        assert_problem(_post(hook, "ses", confirmation), 502, "confirmation_failed")
        fake.confirm_status = 200
        assert _post(hook, "ses", confirmation).get_json() == {"received": True, "suppressed": 0}
        assert len(fake.confirmations) == 1


@pytest.mark.parametrize("version", ["1", "2"])
def test_both_sns_signature_versions_verify(app_with, conn, version):
    with LocalSes(signature_version=version) as fake:
        hook = _app(app_with, fake).test_client()
        assert _post(hook, "ses", fake.bounce("gone@example.com")).status_code == 200


def test_an_unknown_sns_signature_version_is_refused(app_with, conn, caplog):
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        _refused(hook, "ses", fake.bounce("gone@example.com", version="3"), conn, caplog,
                 "SignatureVersion")


def test_ses_configuration_set_events_are_read_too(app_with, conn):
    with LocalSes() as fake:
        hook = _app(app_with, fake).test_client()
        _sent(conn, "gone@example.com", SENT_IDS["ses"])
        event = json.loads(json.loads(fake.bounce("gone@example.com").body)["Message"])
        event["eventType"] = event.pop("notificationType")
        assert _post(hook, "ses", fake.ses_event(event)).get_json()["suppressed"] == 1
    assert [row[0] for row in _state(conn)[0]] == ["gone@example.com"]


@every_provider
def test_a_verified_body_that_is_not_a_notification_is_refused(app_with, fake, conn, name):
    hook = _app(app_with, fake).test_client()
    if isinstance(fake, LocalSendgrid):
        notification = fake.events([{"no": "event"}])  # type: ignore[list-item]
    elif isinstance(fake, LocalMailgun):
        notification = fake.event({"no": "event"})
    elif isinstance(fake, LocalSes):
        notification = fake.sns_message("Notification", {"Message": "not json"})
    elif isinstance(fake, LocalResend):
        notification = fake.event("email.bounced", {})
        notification = Notification(b"[1, 2]", notification.headers)
    else:
        real = fake.bounce("x@example.com")
        notification = Notification(b'"just a string"', real.headers)
    response = _post(hook, name, notification)
    if name == "resend":  # the body is signed: changing it is a forgery
        assert response.status_code == 401
    else:
        assert_problem(response, 400, "invalid_request")
    assert _state(conn)[0] == []


def test_a_sendgrid_batch_larger_than_one_event_fits(app_with, conn):
    """SendGrid batches up to 768 KB; the app's usual 64 KiB would refuse them (413)."""
    with LocalSendgrid() as fake:
        hook = _app(app_with, fake).test_client()
        events = [fake.event("open", f"reader{i}@example.com", f"m{i}", useragent="x" * 200)
                  for i in range(400)]
        events.append(fake.event("bounce", "gone@example.com", "last", type="bounce"))
        _sent(conn, "gone@example.com", "last")
        batch = fake.events(events)
        assert len(batch.body) > 64 * 1024
        response = _post(hook, "sendgrid", batch)
        assert response.status_code == 200, response.get_data(as_text=True)[:200]
        too_big = fake.events(events * 6)
        assert len(too_big.body) > 1024 * 1024
        assert_problem(_post(hook, "sendgrid", too_big), 413, "payload_too_large")
    assert [row[0] for row in _state(conn)[0]] == ["gone@example.com"]


@every_provider
def test_a_body_nested_too_deep_to_parse_is_refused_not_an_error(app_with, fake, conn, name):
    """JSON nested past the parser's limit, with the provider's own headers (credentials
    included): a 4xx that changes nothing, never a 500."""
    hook = _app(app_with, fake).test_client()
    if isinstance(fake, LocalSendgrid):
        real = fake.events([fake.event("bounce", "x@example.com", "m1", type="bounce")])
    elif isinstance(fake, LocalMailgun):
        real = fake.event({"event": "complained", "recipient": "x@example.com"})
    elif isinstance(fake, LocalSes):
        real = fake.sns_message("Notification", {"Message": "{}"})
    elif isinstance(fake, LocalResend):
        real = fake.event("email.bounced", {})
    else:
        real = fake.bounce("x@example.com")
    response = _post(hook, name, Notification(b"[" * 60_000, real.headers))
    assert response.status_code in (400, 401), response.get_data()
    assert response.mimetype == "application/problem+json"
    assert _state(conn) == ([], [])


@pytest.mark.parametrize("moment", [{"ts_epoch": float("nan")},
                                    {"ts_epoch": None, "ts_event": float("nan")}])
def test_a_brevo_event_whose_time_is_not_a_number_is_refused(app_with, conn, caplog, moment):
    """NaN compares false with everything: it must not pass as "within the window"."""
    with LocalBrevo() as fake:
        hook = _app(app_with, fake).test_client()
        real = fake.bounce("gone@example.com")
        record = {**json.loads(real.body), **moment}
        forged = Notification(json.dumps(record).encode(), real.headers)  # NaN, as Python writes it
        _refused(hook, "brevo", forged, conn, caplog, "not a time")


@pytest.mark.parametrize("timestamp", ["\xb2", "\u0663", "", "-5", "1e9"])
def test_a_signed_timestamp_that_is_not_unix_seconds_is_refused(timestamp):
    """SendGrid's and Mailgun's signed timestamps: ASCII digits only (`"²".isdigit()` holds,
    but float() refuses it: a 500 instead of a refusal)."""
    from authsvc.bounces.notices import Refused
    from authsvc.bounces.schemes import check_unix_time

    with pytest.raises(Refused, match="not a Unix time"):
        check_unix_time(timestamp, time.time(), window_seconds=300)
