"""SPEC §3: configuration is validated at start-up, every problem named."""

from __future__ import annotations

from pathlib import Path

import pytest

from authsvc.config import (
    ConfigError,
    RateLimit,
    load_settings,
    parse_http_provider_url,
    parse_smtp_url,
)

GOOD_KEY = "k" * 40


def _load(tmp_path: Path, **env: str):
    return load_settings({"AUTHSVC_DATA_DIR": str(tmp_path), **env})


def test_defaults_match_the_spec(tmp_path):
    s = _load(tmp_path)
    assert s.env == "development"
    assert s.base_url == "http://127.0.0.1:8000"
    assert (s.reset_ttl, s.verify_ttl, s.lease_seconds, s.max_attempts) == (1800, 86400, 45, 8)
    assert s.rate_limit_email == RateLimit(5, 900)
    assert s.rate_limit_ip == RateLimit(30, 900)
    assert s.rate_limit_app == RateLimit(600, 60)
    assert s.rate_limit_login == RateLimit(10, 900)
    assert s.test_inbox is False and s.test_inbox_domain == "inbox.test"


def test_dev_secret_key_is_generated_once_and_reused(tmp_path):
    first = _load(tmp_path).secret_keys
    assert first == _load(tmp_path).secret_keys
    assert len(first[0]) >= 32
    assert (tmp_path / "secret-key").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("value", ["1", "true", "ON", "yes"])
def test_booleans_accept_the_documented_spellings(tmp_path, value):
    assert _load(tmp_path, AUTHSVC_TEST_INBOX=value).test_inbox is True


def test_every_malformed_value_is_reported_at_once(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _load(
            tmp_path,
            AUTHSVC_TEST_INBOX="maybe",
            AUTHSVC_RESET_TTL="soon",
            AUTHSVC_RATE_LIMIT_EMAIL="five",
            AUTHSVC_SMTP_URL="http://mail.example.com",
            AUTHSVC_BASE_URL="ftp://x",
            AUTHSVC_MAX_ATTEMPTS="0",
            AUTHSVC_ENV="staging",
        )
    text = str(caught.value)
    for name in [
        "AUTHSVC_TEST_INBOX",
        "AUTHSVC_RESET_TTL",
        "AUTHSVC_RATE_LIMIT_EMAIL",
        "AUTHSVC_SMTP_URL",
        "AUTHSVC_BASE_URL",
        "AUTHSVC_MAX_ATTEMPTS",
        "AUTHSVC_ENV",
    ]:
        assert name in text
    assert len(caught.value.problems) == 7


def test_production_refuses_unsafe_defaults(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, AUTHSVC_ENV="production", AUTHSVC_TEST_INBOX="on")
    problems = "\n".join(caught.value.problems)
    for needed in ["SECRET_KEYS", "DATABASE_URL", "SMTP_URL", "TEST_INBOX", "https"]:
        assert needed in problems
    assert not (tmp_path / "secret-key").exists(), "nothing may be written on refusal"


def test_production_with_explicit_settings_starts(tmp_path):
    s = _load(
        tmp_path,
        AUTHSVC_ENV="production",
        AUTHSVC_SECRET_KEYS=f"{GOOD_KEY}, {'o' * 40}",
        AUTHSVC_DATABASE_URL="postgresql://db.internal/authsvc",
        AUTHSVC_SMTP_URL="smtps://user:p%40ss@mail.example.com",
        AUTHSVC_BASE_URL="https://auth.example.com/",
        AUTHSVC_METRICS_TOKEN="scrape-token-0123456789",
    )
    assert s.production and s.secret_keys == (GOOD_KEY, "o" * 40)
    assert s.base_url == "https://auth.example.com"
    assert s.smtp is not None and (s.smtp.port, s.smtp.password) == (465, "p@ss")


def test_short_secret_keys_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="shorter than 32"):
        _load(tmp_path, AUTHSVC_SECRET_KEYS="short")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("smtp://127.0.0.1:2525", ("127.0.0.1", 2525, "plain")),
        ("smtp+starttls://u:p@mail.example.com", ("mail.example.com", 587, "starttls")),
        ("smtps://mail.example.com", ("mail.example.com", 465, "ssl")),
    ],
)
def test_smtp_urls(url, expected):
    target = parse_smtp_url(url)
    assert (target.host, target.port, target.security) == expected


@pytest.mark.parametrize("rate", ["5", "5/", "/15m", "0/1m", "5/15x", "-1/1m"])
def test_bad_rate_limits_are_named(tmp_path, rate):
    with pytest.raises(ConfigError, match="AUTHSVC_RATE_LIMIT_IP"):
        _load(tmp_path, AUTHSVC_RATE_LIMIT_IP=rate)


def test_mail_url_takes_an_http_provider(tmp_path):
    s = _load(tmp_path, AUTHSVC_MAIL_URL="resend://re_abc%2Bdef@api.resend.com")
    assert s.http_provider is not None and s.smtp is None
    assert s.http_provider.base_url == "https://api.resend.com"
    assert s.http_provider.api_key == "re_abc+def"
    assert "re_abc" not in repr(s)


@pytest.mark.parametrize("url, expected", [
    ("postmark://pm-token@api.postmarkapp.com?message_stream=auth",
     ("postmark", "https://api.postmarkapp.com", "pm-token", None, None, None,
      (("message_stream", "auth"),))),
    ("ses://AKIAEXAMPLE:wJalr%2FK7MDENG@email.eu-west-1.amazonaws.com?configuration_set=bounces",
     ("ses", "https://email.eu-west-1.amazonaws.com", "AKIAEXAMPLE", "wJalr/K7MDENG", None,
      "eu-west-1", (("configuration_set", "bounces"),))),
    ("sendgrid://SG.key@api.sendgrid.com",
     ("sendgrid", "https://api.sendgrid.com", "SG.key", None, None, None, ())),
    ("mailgun://key-1@api.eu.mailgun.net/MG.Example.com",
     ("mailgun", "https://api.eu.mailgun.net", "key-1", None, "mg.example.com", None, ())),
    ("brevo+http://xkeysib-1@127.0.0.1:8025",
     ("brevo", "http://127.0.0.1:8025", "xkeysib-1", None, None, None, ())),
])
def test_mail_url_takes_every_http_providers_form(url, expected):
    t = parse_http_provider_url(url)
    assert (t.provider, t.base_url, t.api_key, t.secret, t.domain, t.region, t.options) == expected
    assert t.api_key not in repr(t) and (t.secret is None or t.secret not in repr(t))


def test_smtp_url_is_still_read_as_the_mail_url(tmp_path):
    assert _load(tmp_path, AUTHSVC_SMTP_URL="smtps://mail.example.com").smtp is not None
    s = _load(tmp_path, AUTHSVC_SMTP_URL="resend://re_k@api.resend.com")
    assert s.http_provider is not None


@pytest.mark.parametrize("url, problem", [
    ("resend://api.resend.com", "API key"),
    ("resend://re_k:secret@api.resend.com", "API key"),
    ("resend://re_k@api.resend.com/emails", "no path"),
    ("resend://re_k@api.resend.com:99999", "bad port"),
    ("sparkpost://re_k@api.sparkpost.com", "scheme"),
    ("postmark://tok@api.postmarkapp.com?stream=x", "only message_stream"),
    ("ses://AKID@email.us-east-1.amazonaws.com", "secret access key"),
    ("ses://AKID:secret@ses.example.com", "region"),
    ("ses://AKID:secret@email.us-east-1.amazonaws.com?region=moon", "region"),
    ("mailgun://key@api.mailgun.net", "sending domain"),
    ("mailgun://key@api.mailgun.net/a/b", "sending domain"),
    ("brevo://key:pw@api.brevo.com", "API key"),
    ("sendgrid://SG.k@api.sendgrid.com/v3", "no path"),
])
def test_malformed_mail_urls_are_refused(tmp_path, url, problem):
    with pytest.raises(ConfigError, match=problem):
        _load(tmp_path, AUTHSVC_MAIL_URL=url)


def test_mail_url_and_smtp_url_must_agree(tmp_path):
    with pytest.raises(ConfigError, match="differ"):
        _load(tmp_path, AUTHSVC_MAIL_URL="resend://re_k@api.resend.com",
              AUTHSVC_SMTP_URL="smtp://mail.example.com")


def test_production_refuses_plain_http_providers(tmp_path):
    with pytest.raises(ConfigError, match=r"resend\+http:// is for local fakes"):
        _load(tmp_path, AUTHSVC_ENV="production", AUTHSVC_SECRET_KEYS=GOOD_KEY,
              AUTHSVC_DATABASE_URL="postgresql://db/x", AUTHSVC_METRICS_TOKEN="m" * 20,
              AUTHSVC_BASE_URL="https://auth.example",
              AUTHSVC_MAIL_URL="resend+http://re_k@127.0.0.1:8025")


@pytest.mark.parametrize("secret", ["not base64 !", "whsec_c2hvcnQ="])
def test_a_malformed_provider_webhook_secret_is_refused(tmp_path, secret):
    with pytest.raises(ConfigError, match="AUTHSVC_PROVIDER_WEBHOOK_SECRET"):
        _load(tmp_path, AUTHSVC_PROVIDER_WEBHOOK_SECRET=secret)


def test_the_address_life_settings_have_the_documented_defaults(tmp_path):
    settings = _load(tmp_path)
    assert (settings.email_change_ttl, settings.email_revert_ttl, settings.delete_ttl) == (
        3600, 604800, 3600)
    assert settings.email_change_confirm_old is False


def test_the_address_life_settings_take_durations_and_a_boolean(tmp_path):
    settings = _load(tmp_path, AUTHSVC_EMAIL_CHANGE_TTL="30m", AUTHSVC_EMAIL_REVERT_TTL="14d",
                     AUTHSVC_DELETE_TTL="2h", AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD="off")
    assert (settings.email_change_ttl, settings.email_revert_ttl, settings.delete_ttl) == (
        1800, 14 * 86400, 7200)
    assert settings.email_change_confirm_old is False


def test_the_sign_in_settings_have_the_documented_defaults_and_take_values(tmp_path):
    settings = _load(tmp_path)
    assert (settings.sign_in_ttl, settings.notify_unknown_addresses) == (900, False)
    settings = _load(tmp_path, AUTHSVC_SIGN_IN_TTL="5m", AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES="on")
    assert (settings.sign_in_ttl, settings.notify_unknown_addresses) == (300, True)
    with pytest.raises(ConfigError, match="AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES"):
        _load(tmp_path, AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES="maybe")
    with pytest.raises(ConfigError, match="AUTHSVC_SIGN_IN_TTL"):
        _load(tmp_path, AUTHSVC_SIGN_IN_TTL="soon")


def test_confirming_at_the_old_address_too_can_be_turned_on(tmp_path):
    assert _load(tmp_path, AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD="on").email_change_confirm_old


def test_malformed_address_life_settings_are_each_reported(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, AUTHSVC_EMAIL_CHANGE_TTL="an hour", AUTHSVC_EMAIL_REVERT_TTL="0",
              AUTHSVC_DELETE_TTL="-5", AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD="sometimes")
    problems = "\n".join(caught.value.problems)
    for name in ("AUTHSVC_EMAIL_CHANGE_TTL", "AUTHSVC_EMAIL_REVERT_TTL", "AUTHSVC_DELETE_TTL",
                 "AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD"):
        assert name in problems
    assert len(caught.value.problems) == 4


@pytest.mark.parametrize("name, value, problem", [
    ("AUTHSVC_POSTMARK_WEBHOOK_AUTH", "hook:short", "shorter than 16"),
    ("AUTHSVC_POSTMARK_WEBHOOK_AUTH", ":a-long-enough-password", "empty user"),
    ("AUTHSVC_BREVO_WEBHOOK_AUTH", "a token with spaces in it", "spaces"),
    ("AUTHSVC_MAILGUN_WEBHOOK_SIGNING_KEY", "tiny", "shorter than 16"),
    ("AUTHSVC_SES_WEBHOOK_TOPIC_ARNS", "arn:aws:sqs:us-east-1:123456789012:q", "SNS topic ARN"),
    ("AUTHSVC_SES_WEBHOOK_TOPIC_ARNS", "my-topic", "SNS topic ARN"),
    ("AUTHSVC_SENDGRID_WEBHOOK_PUBLIC_KEY", "not base64!", "base64 public key"),
    # An RSA key (base64 DER): SendGrid's is ECDSA P-256.
    ("AUTHSVC_SENDGRID_WEBHOOK_PUBLIC_KEY",
     "MFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAK1g3s3D0Wm8cKrW0b2m6vY2tEw3f4m5Q9o2n8sQyYb0D7JXw+2Nd1hb"
     "j7xUq5FhZqM7M0pJ3l4P1RZkVQa4z4ECAwEAAQ==", "P-256"),
])
def test_malformed_provider_webhook_settings_are_refused(tmp_path, name, value, problem):
    with pytest.raises(ConfigError, match=problem) as caught:
        _load(tmp_path, **{name: value})
    assert name in str(caught.value)


def test_provider_webhook_settings_are_read_and_kept_out_of_reprs(tmp_path):
    s = _load(tmp_path, AUTHSVC_POSTMARK_WEBHOOK_AUTH="hook:a-long-password-1",
              AUTHSVC_BREVO_WEBHOOK_AUTH="brevo-token-0123456789",
              AUTHSVC_MAILGUN_WEBHOOK_SIGNING_KEY="mailgun-signing-key-0123",
              AUTHSVC_SES_WEBHOOK_TOPIC_ARNS="arn:aws:sns:us-east-1:123456789012:a, "
                                             "arn:aws:sns:eu-west-1:123456789012:b")
    hooks = s.provider_webhooks
    assert hooks.ses_topic_arns == ("arn:aws:sns:us-east-1:123456789012:a",
                                    "arn:aws:sns:eu-west-1:123456789012:b")
    for secret in ("a-long-password-1", "brevo-token-0123456789", "mailgun-signing-key-0123"):
        assert secret not in repr(s)
