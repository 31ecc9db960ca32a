"""`authsvc apps create|list|update|rotate-key|revoke` as an operator runs them.

In-process (click's runner) against a real database; the key changes are
checked against the JSON API at once.
"""

from __future__ import annotations

import re
import uuid

import pytest
from click.testing import CliRunner, Result

from authsvc.app_events.secrets import open_secret
from authsvc.apps.keys import find_app_by_key
from authsvc.cli import main
from testkit.waiting import wait_until
from tests.race_support import advisory_locks

REDIRECT = "https://shop.example.com/auth"


@pytest.fixture
def cli(env):
    runner = CliRunner(env=env)

    def run(*args: str, **overrides: str) -> Result:
        return runner.invoke(main, list(args), env={**env, **overrides}, catch_exceptions=False)

    return run


def _value(result: Result, label: str) -> str:
    match = re.search(rf"^{label}:\s+(\S+)$", result.stdout, re.MULTILINE)
    assert match, result.output
    return match.group(1)


def _create(cli, name: str = "Shop", *extra: str) -> tuple[str, str, Result]:
    result = cli("apps", "create", name, "--redirect-url", REDIRECT, *extra)
    assert result.exit_code == 0, result.output
    return _value(result, "app id"), _value(result, "api key"), result


def _one_clear_line(result: Result, message: str) -> None:
    assert result.exit_code != 0
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[-1].startswith("Error:")


def _api_status(client, key: str) -> int:
    response = client.post(
        "/api/v1/verifications",
        json={"email": "someone@example.com"},
        headers={"Authorization": f"Bearer {key}"},
    )
    return response.status_code


PRODUCTION = {
    "AUTHSVC_ENV": "production",
    "AUTHSVC_SMTP_URL": "smtp://127.0.0.1:25",
    "AUTHSVC_METRICS_TOKEN": "metrics-token-0123456789",
    "AUTHSVC_BASE_URL": "https://auth.example.com",
}


def test_create_with_a_webhook_prints_the_secret_once_and_keeps_it_sealed(cli, conn, settings):
    app_id, _key, result = _create(cli, "Shop", "--webhook-url", "https://shop.example.com/hooks")
    secret = _value(result, "webhook secret")
    assert secret.startswith("whsec_")
    stored = bytes(conn.execute("SELECT webhook_secret FROM apps").fetchone()[0])
    assert secret.encode() not in stored and secret.removeprefix("whsec_").encode() not in stored
    assert open_secret(settings.secret_keys, uuid.UUID(app_id), stored) == secret
    listing = cli("apps", "list")
    assert listing.exit_code == 0
    assert app_id in listing.stdout and "https://shop.example.com/hooks" in listing.stdout
    assert "whsec_" not in listing.output and "ask_" not in listing.output


def test_create_without_a_webhook_prints_no_secret(cli):
    _app_id, _key, result = _create(cli)
    assert "webhook secret" not in result.output


def test_list_shows_every_app_and_says_so_when_there_are_none(cli):
    assert "no apps registered" in cli("apps", "list").stdout
    first, _, _ = _create(cli, "Shop")
    second, _, _ = _create(cli, "Blog")
    cli("apps", "revoke", second)
    lines = cli("apps", "list").stdout.splitlines()
    assert [line.split()[:3] for line in lines] == [
        [first, "Shop", "live"],
        [second, "Blog", "revoked"],
    ]


def test_a_duplicate_name_is_refused(cli, conn):
    _create(cli, "Shop")
    _one_clear_line(cli("apps", "create", "shop", "--redirect-url", REDIRECT), "already exists")
    assert conn.execute("SELECT count(*) FROM apps").fetchone()[0] == 1


def test_rotate_key_stops_the_old_key_at_once(cli, client):
    app_id, old_key, _ = _create(cli)
    assert _api_status(client, old_key) == 202
    result = cli("apps", "rotate-key", app_id)
    assert result.exit_code == 0, result.output
    new_key = _value(result, "api key")
    assert new_key != old_key
    assert _api_status(client, old_key) == 401
    assert _api_status(client, new_key) == 202


def test_revoke_stops_the_key_at_once_and_is_final(cli, client, conn):
    app_id, key, _ = _create(cli)
    assert _api_status(client, key) == 202
    result = cli("apps", "revoke", app_id)
    assert result.exit_code == 0 and f"revoked app {app_id}" in result.stdout
    assert _api_status(client, key) == 401
    assert find_app_by_key(conn, key) is None
    _one_clear_line(cli("apps", "rotate-key", app_id), "was revoked")
    _one_clear_line(cli("apps", "update", app_id, "--redirect-url", REDIRECT), "was revoked")
    _one_clear_line(cli("apps", "revoke", app_id), "was revoked")
    # The name is free again for a new app.
    _create(cli)


def test_update_replaces_redirects_and_sets_the_webhook(cli, conn, client):
    app_id, key, _ = _create(cli)
    result = cli(
        "apps", "update", app_id, "--redirect-url", "https://new.example.com/a",
        "--redirect-url", "https://new.example.com/b",
    )
    assert result.exit_code == 0, result.output
    assert "webhook secret" not in result.output
    row = conn.execute("SELECT redirect_urls FROM apps").fetchone()
    assert row[0] == ["https://new.example.com/a", "https://new.example.com/b"]
    # The API honours the new allowlist at once.
    reply = client.post(
        "/api/v1/verifications",
        json={"email": "a@example.com", "redirect_url": REDIRECT},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert reply.status_code == 400 and reply.get_json()["code"] == "redirect_not_allowed"
    first = cli("apps", "update", app_id, "--webhook-url", "https://new.example.com/hooks")
    secret = _value(first, "webhook secret")
    # A second URL change keeps the secret (receivers keep verifying).
    again = cli("apps", "update", app_id, "--webhook-url", "https://new.example.com/hooks2")
    assert again.exit_code == 0 and "webhook secret" not in again.output
    rotated = cli("apps", "update", app_id, "--new-webhook-secret")
    assert _value(rotated, "webhook secret") != secret
    cleared = cli("apps", "update", app_id, "--no-webhook")
    assert cleared.exit_code == 0
    assert conn.execute("SELECT webhook_url FROM apps").fetchone()[0] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["apps", "update", "not-a-uuid", "--redirect-url", REDIRECT], "not an app id"),
        (["apps", "rotate-key", "42"], "not an app id"),
        (["apps", "revoke", ""], "not an app id"),
        (["apps", "update", str(uuid.UUID(int=1)), "--redirect-url", REDIRECT], "no app with id"),
        (["apps", "rotate-key", str(uuid.UUID(int=1))], "no app with id"),
        (["apps", "revoke", str(uuid.UUID(int=1))], "no app with id"),
        (["apps", "update", "{id}"], "nothing to change"),
        (["apps", "update", "{id}", "--redirect-url", "javascript:alert(1)"], "absolute http"),
        (["apps", "update", "{id}", "--webhook-url", "ftp://x.example/h"], "absolute http(s)"),
        (["apps", "update", "{id}", "--webhook-url", "https://u:p@x.example/"], "credentials"),
        (["apps", "update", "{id}", "--webhook-url", "https://x.example/#f"], "fragment"),
        (["apps", "update", "{id}", "--webhook-url", "https://x.example/\u202e"], "not a usable"),
        (["apps", "update", "{id}", "--new-webhook-secret"], "has no webhook or delivery URL"),
        (
            ["apps", "update", "{id}", "--webhook-url", "https://x.example/", "--no-webhook"],
            "contradict",
        ),
        (["apps", "create", "X", "--redirect-url", REDIRECT, "--webhook-url", "x"], "absolute"),
    ],
)
def test_bad_input_gets_one_clear_line_and_changes_nothing(cli, conn, args, message):
    app_id, _key, _ = _create(cli, "Existing")
    before = conn.execute("SELECT * FROM apps ORDER BY id").fetchall()
    result = cli(*[a.replace("{id}", app_id) for a in args])
    assert result.exit_code != 0
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert conn.execute("SELECT * FROM apps ORDER BY id").fetchall() == before


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hooks.example.com/h", "must use https"),
        ("https://127.0.0.1/h", "non-public"),
        ("https://localhost/h", "non-public"),
        ("https://10.1.2.3/h", "non-public"),
        ("https://169.254.169.254/latest", "non-public"),
        ("https://[::1]/h", "non-public"),
        ("https://[::ffff:127.0.0.1]/h", "non-public"),
        ("https://[fd00::1]/h", "non-public"),
        ("https://100.64.0.1/h", "non-public"),
    ],
)
def test_production_refuses_private_webhook_targets_at_create_and_update(cli, conn, url, message):
    result = cli(
        "apps", "create", "Shop", "--redirect-url", REDIRECT, "--webhook-url", url, **PRODUCTION
    )
    assert result.exit_code != 0 and message in result.stderr, result.output
    assert conn.execute("SELECT count(*) FROM apps").fetchone()[0] == 0
    app_id, _key, _ = _create(cli, "Shop")
    result = cli("apps", "update", app_id, "--webhook-url", url, **PRODUCTION)
    assert result.exit_code != 0 and message in result.stderr, result.output
    assert conn.execute("SELECT webhook_url FROM apps").fetchone()[0] is None


def test_outside_production_a_loopback_http_webhook_is_allowed(cli):
    _app_id, _key, result = _create(cli, "Shop", "--webhook-url", "http://127.0.0.1:9/h")
    assert "webhook secret: whsec_" in result.stdout


def test_two_creates_at_once_cannot_both_take_a_name(database_url, conn):
    """The name check holds a lock until commit: the second create sees the first's app."""
    import threading

    import psycopg

    from authsvc.apps.keys import name_taken, register_app

    second_saw: list[bool] = []
    with psycopg.connect(database_url) as first:
        assert not name_taken(first, "Shop")
        register_app(first, "Shop", [REDIRECT])

        def second_create() -> None:
            with psycopg.connect(database_url) as second:
                second_saw.append(name_taken(second, "shop"))

        thread = threading.Thread(target=second_create)
        thread.start()
        wait_until(lambda: advisory_locks(conn, waiting=True) > 0,
                   what="the second create to wait")
        first.commit()
    thread.join(10)
    assert second_saw == [True]


def test_a_delivery_url_is_set_listed_and_cleared(cli, conn, settings):
    """`apps update ID --delivery-url URL`: the app delivers its own mail (SPEC §10 hook://)."""
    app_id, _key, _ = _create(cli, "Shop")
    result = cli("apps", "update", app_id, "--delivery-url", "http://127.0.0.1:9/mail")
    assert result.exit_code == 0, result.output
    secret = _value(result, "webhook secret")  # the first signing secret: shown once
    sealed = conn.execute("SELECT webhook_secret FROM apps").fetchone()[0]
    assert open_secret(settings.secret_keys, uuid.UUID(app_id), sealed) == secret
    listed = cli("apps", "list")
    assert "delivery: http://127.0.0.1:9/mail" in listed.stdout
    # The webhook, set later, signs with the same secret: none is printed again.
    again = cli("apps", "update", app_id, "--webhook-url", "http://127.0.0.1:9/events")
    assert again.exit_code == 0 and "webhook secret" not in again.output
    rotated = cli("apps", "update", app_id, "--no-webhook", "--new-webhook-secret")
    assert rotated.exit_code == 0 and _value(rotated, "webhook secret") != secret
    cleared = cli("apps", "update", app_id, "--no-delivery-url")
    assert cleared.exit_code == 0
    assert conn.execute("SELECT delivery_url FROM apps").fetchone()[0] is None


@pytest.mark.parametrize(("args", "message"), [
    (["--delivery-url", "https://x.example/m", "--no-delivery-url"], "contradict"),
    (["--delivery-url", "ftp://x.example/m"], "absolute http(s)"),
    (["--delivery-url", "https://u:p@x.example/m"], "credentials"),
])
def test_a_bad_delivery_url_is_refused_and_changes_nothing(cli, conn, args, message):
    app_id, _key, _ = _create(cli, "Shop")
    before = conn.execute("SELECT * FROM apps").fetchall()
    _one_clear_line(cli("apps", "update", app_id, *args), message)
    assert conn.execute("SELECT * FROM apps").fetchall() == before


@pytest.mark.parametrize("url", ["http://hooks.example.com/m", "https://127.0.0.1/m",
                                 "https://169.254.169.254/latest", "https://[fd00::1]/m",
                                 "https://[::ffff:10.0.0.1]/m"])
def test_production_refuses_private_delivery_urls(cli, conn, url):
    app_id, _key, _ = _create(cli, "Shop")
    result = cli("apps", "update", app_id, "--delivery-url", url, **PRODUCTION)
    assert result.exit_code != 0 and "--delivery-url" in result.stderr, result.output
    assert conn.execute("SELECT delivery_url FROM apps").fetchone()[0] is None
