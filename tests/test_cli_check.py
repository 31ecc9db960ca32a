"""`authsvc check` (SPEC §15): a good configuration passes; a broken setting fails its line."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from click.testing import CliRunner, Result

from authsvc.cli import main
from authsvc.config import parse_http_provider_url
from authsvc.worker.providers import HTTP_PROVIDERS
from testkit.waiting import free_port
from tests.provider_support import every_provider, running_fake

METRICS_TOKEN = "metrics-token-0123456789"
SMTP_PASSWORD = "smtp-password-42"


def _check(env: dict[str, str]) -> Result:
    return CliRunner().invoke(main, ["check"], env=env)


def _lines(result: Result) -> dict[str, tuple[str, str]]:
    """check name -> (status, detail), from lines `STATUS  name  detail`."""
    found = {}
    for line in result.output.splitlines():
        status, rest = line[:4].strip(), line[6:]
        name, _, detail = rest.partition("  ")
        found[name.strip()] = (status, detail.strip())
    return found


@pytest.fixture
def production(env, smtp) -> dict[str, str]:
    """A production configuration that passes every check."""
    return {**env, "AUTHSVC_ENV": "production", "AUTHSVC_BASE_URL": "https://auth.example.com",
            "AUTHSVC_METRICS_TOKEN": METRICS_TOKEN, "AUTHSVC_MAIL_URL": smtp.url,
            "AUTHSVC_MAIL_FROM": "authsvc <no-reply@example.com>"}


def test_a_good_configuration_passes_every_check(production, smtp):
    result = _check(production)
    assert result.exit_code == 0, result.output
    lines = _lines(result)
    assert list(lines) == ["settings", "secrets", "base url", "metrics token", "database",
                           "migrations", "mail transport", "translations"]
    assert all(status == "ok" for status, _ in lines.values()), result.output
    assert "nothing sent" in lines["mail transport"][1]
    assert smtp.messages == []


def _only_failure(result: Result, name: str) -> str:
    assert result.exit_code == 1, result.output
    lines = _lines(result)
    failed = {n for n, (status, _) in lines.items() if status == "FAIL"}
    assert name in failed, result.output
    return lines[name][1]


@pytest.mark.parametrize(("change", "check", "says"), [
    ({"AUTHSVC_SECRET_KEYS": "short"}, "secrets", "shorter than 32"),
    ({"AUTHSVC_SECRET_KEYS": ""}, "secrets", "required in production"),
    ({"AUTHSVC_BASE_URL": "http://auth.example.com"}, "base url", "https"),
    ({"AUTHSVC_BASE_URL": "auth.example.com"}, "base url", "expected an http(s) URL"),
    ({"AUTHSVC_METRICS_TOKEN": ""}, "metrics token", "required in production"),
    ({"AUTHSVC_METRICS_TOKEN": "short"}, "metrics token", "at least 16"),
    ({"AUTHSVC_MAIL_URL": ""}, "mail transport", "required in production"),
    ({"AUTHSVC_MAIL_URL": "null://"}, "mail transport", "refused in production"),
    ({"AUTHSVC_MAIL_URL": "ftp://mail.example.com"}, "mail transport", "AUTHSVC_MAIL_URL"),
    ({"AUTHSVC_DATABASE_URL": "mysql://db/authsvc"}, "database", "AUTHSVC_DATABASE_URL"),
    ({"AUTHSVC_DIRECT_DATABASE_URL": "mysql://db/authsvc"}, "database",
     "AUTHSVC_DIRECT_DATABASE_URL"),
    ({"AUTHSVC_LOG_LEVEL": "chatty"}, "settings", "AUTHSVC_LOG_LEVEL"),
    ({"AUTHSVC_MAIL_FROM": "nobody"}, "settings", "AUTHSVC_MAIL_FROM"),
    ({"AUTHSVC_TEST_INBOX": "on"}, "settings", "AUTHSVC_TEST_INBOX"),
])
def test_a_broken_setting_fails_its_own_line_only(production, smtp, change, check, says):
    """One broken setting: exactly one FAIL line, naming it; every other check still runs
    (only migrations waits for a database it can reach)."""
    result = _check({**production, **change})
    assert says in _only_failure(result, check)
    lines = _lines(result)
    assert [n for n, (s, _) in lines.items() if s == "FAIL"] == [check], result.output
    can_run = set(lines) - {check} - ({"migrations"} if check == "database" else set())
    assert {n for n in can_run if lines[n][0] != "ok"} == set(), result.output
    if check == "database":
        assert lines["migrations"] == ("skip", "needs the database")
    assert smtp.messages == []


def test_a_missing_compiled_catalog_fails_the_translations_line(production, tmp_path,
                                                                monkeypatch):
    from authsvc import locales
    monkeypatch.setattr(locales, "translations_dir", lambda: tmp_path)
    locales.translations.cache_clear()
    try:
        result = _check(production)
    finally:
        locales.translations.cache_clear()
    says = _only_failure(result, "translations")
    assert "de/LC_MESSAGES/emails.mo" in says and "make install" in says
    assert [n for n, (s, _) in _lines(result).items() if s == "FAIL"] == ["translations"]


def test_an_unreachable_database_fails_the_database_line(production):
    url = f"postgresql://nobody@127.0.0.1:{free_port()}/authsvc"
    result = _check({**production, "AUTHSVC_DATABASE_URL": url,
                     "AUTHSVC_DIRECT_DATABASE_URL": url})
    _only_failure(result, "database")
    assert _lines(result)["migrations"][0] == "skip"
    assert {n for n, (s, _) in _lines(result).items() if s == "FAIL"} == {"database"}


def test_pending_migrations_fail_the_migrations_line(production, empty_database_url):
    result = _check({**production, "AUTHSVC_DATABASE_URL": empty_database_url,
                     "AUTHSVC_DIRECT_DATABASE_URL": empty_database_url})
    assert "authsvc db upgrade" in _only_failure(result, "migrations")
    assert _lines(result)["database"][0] == "ok"


def test_an_unreachable_mail_server_fails_the_mail_line(production):
    result = _check({**production, "AUTHSVC_MAIL_URL": f"smtp://127.0.0.1:{free_port()}"})
    _only_failure(result, "mail transport")
    assert {n for n, (s, _) in _lines(result).items() if s == "FAIL"} == {"mail transport"}


def test_no_secret_is_ever_printed(production, smtp):
    with_login = smtp.url.replace("smtp://", f"smtp://user:{SMTP_PASSWORD}@")
    for env in (production, {**production, "AUTHSVC_MAIL_URL": with_login},
                {**production, "AUTHSVC_METRICS_TOKEN": "short"}):
        output = _check(env).output
        for secret in (production["AUTHSVC_SECRET_KEYS"], METRICS_TOKEN, SMTP_PASSWORD):
            assert secret not in output


def test_the_database_password_is_not_printed_when_libpq_quotes_it(production):
    """libpq quotes what it cannot parse; a password with a stray % is quoted whole."""
    url = f"postgresql://u:s3cr%zzet@127.0.0.1:{free_port()}/authsvc"
    result = _check({**production, "AUTHSVC_DATABASE_URL": url,
                     "AUTHSVC_DIRECT_DATABASE_URL": url})
    assert _lines(result)["database"][0] == "FAIL"
    assert "s3cr" not in result.output


# HTTP providers: one authenticated, read-only call to each provider's local fake
# (tools/local_*.py), never a send. Local fakes speak http, which only a
# non-production configuration takes; every other line passes there too.
WRONG_KEY = "wrong-key-0123456789"


@pytest.fixture
def development(env) -> dict[str, str]:
    return {**env, "AUTHSVC_MAIL_FROM": "authsvc <no-reply@example.com>"}


def _with_key(fake, key: str) -> str:
    return fake.mail_url.replace(f"//{fake.api_key}", f"//{key}", 1)


def _unsent(fake) -> None:
    """The check read and sent nothing: no send request reached the fake."""
    assert fake.requests == [] and fake.snapshot() == []
    assert [r.method for r in fake.other_requests] == ["GET"]


@every_provider
def test_a_provider_that_accepts_the_key_passes(development, name):
    with running_fake(name) as case:
        result = _check({**development, "AUTHSVC_MAIL_URL": case.fake.mail_url})
        _unsent(case.fake)
    assert result.exit_code == 0, result.output
    status, detail = _lines(result)["mail transport"]
    assert status == "ok"
    assert detail.startswith(f"{name} at http://127.0.0.1:")
    assert "key accepted" in detail and "nothing sent" in detail
    assert case.fake.api_key not in result.output


@every_provider
def test_a_refused_key_fails_the_mail_line_naming_the_provider(development, name):
    with running_fake(name) as case:
        result = _check({**development, "AUTHSVC_MAIL_URL": _with_key(case.fake, WRONG_KEY)})
        _unsent(case.fake)
    detail = _only_failure(result, "mail transport")
    assert {n for n, (s, _) in _lines(result).items() if s == "FAIL"} == {"mail transport"}
    assert detail.startswith(f"{name} at ") and "key refused" in detail, detail
    assert WRONG_KEY not in result.output and case.fake.api_key not in result.output


def test_a_wrong_ses_secret_is_a_refused_key(development):
    with running_fake("ses") as case:
        url = case.fake.mail_url.replace("local%2Ftest%2Fsecret", "other%2Fsecret", 1)
        assert url != case.fake.mail_url
        result = _check({**development, "AUTHSVC_MAIL_URL": url})
    detail = _only_failure(result, "mail transport")
    assert "key refused" in detail and "InvalidSignatureException" in detail
    assert "other/secret" not in result.output and "local/test/secret" not in result.output


@every_provider
def test_an_unreachable_provider_fails_the_mail_line(development, name):
    with running_fake(name) as case:
        url = case.fake.mail_url.replace(f":{case.fake.port}", f":{free_port()}", 1)
    result = _check({**development, "AUTHSVC_MAIL_URL": url})
    detail = _only_failure(result, "mail transport")
    assert {n for n, (s, _) in _lines(result).items() if s == "FAIL"} == {"mail transport"}
    assert detail.startswith(f"{name} at ") and "unreachable" in detail, detail


def test_a_provider_that_never_answers_times_out(development, monkeypatch):
    monkeypatch.setattr("authsvc.cli.check.TIMEOUT", 0.4)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never answers
        url = f"resend+http://re_key@127.0.0.1:{silent.getsockname()[1]}"
        result = _check({**development, "AUTHSVC_MAIL_URL": url})
    assert "timed out" in _only_failure(result, "mail transport")


def test_another_status_is_named_on_the_mail_line(development):
    """Mailgun answers an unknown sending domain with 404: the key is fine, the domain not."""
    with running_fake("mailgun") as case:
        url = case.fake.mail_url.replace("/mg.example.com", "/mg.other.example")
        assert url != case.fake.mail_url
        result = _check({**development, "AUTHSVC_MAIL_URL": url})
    detail = _only_failure(result, "mail transport")
    assert "GET /v4/domains/mg.other.example answered 404: Domain not found" in detail
    assert "key refused" not in detail


def test_a_sendgrid_key_without_mail_send_fails(development):
    with running_fake("sendgrid", scopes=("user.profile.read",)) as case:
        result = _check({**development, "AUTHSVC_MAIL_URL": case.fake.mail_url})
    assert "lacks the mail.send scope" in _only_failure(result, "mail transport")


@pytest.mark.parametrize(("name", "options", "says"), [
    ("resend", {"full_access": False}, "sending-only key"),
    ("ses", {"get_account_allowed": False}, "does not allow ses:GetAccount"),
])
def test_a_key_that_may_only_send_passes(development, name, options, says):
    """The provider knows the key and says it may only send: that is what the worker needs."""
    with running_fake(name, **options) as case:
        result = _check({**development, "AUTHSVC_MAIL_URL": case.fake.mail_url})
        _unsent(case.fake)
    assert result.exit_code == 0, result.output
    status, detail = _lines(result)["mail transport"]
    assert status == "ok" and "key accepted" in detail and says in detail


def test_an_ses_account_whose_sending_is_paused_fails(development):
    with running_fake("ses", sending_enabled=False) as case:
        result = _check({**development, "AUTHSVC_MAIL_URL": case.fake.mail_url})
    detail = _only_failure(result, "mail transport")
    assert "key accepted (GET /v2/email/account: 200), but sending is paused" in detail


class _Portal(BaseHTTPRequestHandler):
    """A captive portal or a proxy: 200 and a page, whatever was asked."""

    def do_GET(self) -> None:
        page = b"<html><body>Please sign in to the network</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *_args: object) -> None:
        pass


def test_a_page_that_is_not_the_providers_answer_fails(development):
    """A 200 that is not the provider's JSON proves nothing about the key."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Portal)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        url = f"brevo+http://xkeysib-key@127.0.0.1:{server.server_address[1]}"
        result = _check({**development, "AUTHSVC_MAIL_URL": url})
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    detail = _only_failure(result, "mail transport")
    assert "GET /v3/account answered 200, but not as brevo does" in detail
    assert "Please sign in" in detail


def test_resend_answering_an_unknown_key_400_is_a_refused_key():
    """One version of Resend's error reference answers an unknown key on every endpoint
    but sending with 400 validation_error "API key is invalid"."""
    mailer = HTTP_PROVIDERS["resend"](parse_http_provider_url("resend://re_unknown@api.resend.com"),
                                      timeout=2.0)
    mailer._client = httpx.Client(base_url="https://api.resend.com", transport=httpx.MockTransport(
        lambda _request: httpx.Response(400, json={
            "statusCode": 400, "name": "validation_error", "message": "API key is invalid"})))
    greeting = mailer.greet()
    assert not greeting.ok
    assert greeting.detail == ("key refused (GET /domains: 400 validation_error:"
                               " API key is invalid)")
