"""`authsvc apps update` brand options and `authsvc templates preview`, as operators run them."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner, Result

from authsvc.apps.keys import register_app, revoke_app
from authsvc.cli import main
from authsvc.emails import app_templates
from tests.worker_support import worker


@pytest.fixture
def cli(env):
    runner = CliRunner(env=env)

    def run(*args: str) -> Result:
        return runner.invoke(main, list(args), env=env, catch_exceptions=False)

    return run


def _brand(conn, app_id) -> tuple:
    return conn.execute("SELECT product_name, brand_color, mail_from, logo_url FROM apps"
                        " WHERE id = %s", (app_id,)).fetchone()


def test_operators_set_the_brand_and_the_sender(cli, conn):
    app, _key = register_app(conn, "Shop", [])
    result = cli("apps", "update", str(app.id), "--product-name", "Shop  Deluxe",
                 "--brand-color", "#ABCDEF", "--mail-from", "Shop Team <Hello@Shop.example>",
                 "--logo-url", "https://shop.example/l.png")
    assert result.exit_code == 0, result.output
    assert _brand(conn, app.id) == ("Shop Deluxe", "#abcdef", "Shop Team <hello@shop.example>",
                                    "https://shop.example/l.png")
    assert cli("apps", "update", str(app.id), "--logo-url", "").exit_code == 0
    assert _brand(conn, app.id)[3] is None


@pytest.mark.parametrize(("option", "value"), [
    ("--mail-from", "Shop <not an address>"), ("--mail-from", "a@b.example, c@d.example"),
    ("--mail-from", 'Sh"op <a@b.example>'), ("--logo-url", "http://shop.example/l.png"),
    ("--brand-color", "blue"), ("--product-name", "x" * 65), ("--default-locale", "??"),
])
def test_bad_brand_options_exit_non_zero_with_the_reason(cli, conn, option, value):
    app, _key = register_app(conn, "Shop", [])
    result = cli("apps", "update", str(app.id), option, value)
    assert result.exit_code == 2 and option in result.stderr and "Traceback" not in result.output
    assert _brand(conn, app.id) == (None, None, None, None)


def test_a_preview_goes_through_the_outbox_marked_and_redeeming_nothing(
        cli, conn, database_url, settings, smtp, svc):
    app, _key = register_app(conn, "Shop", [])
    cli("apps", "update", str(app.id), "--product-name", "Shop Brand")
    app_templates.put_template(conn, app.id, "verify", "de", subject="Willkommen",
                               text="{{ link }} {{ code }}", html="<p>{{ link }} {{ code }}</p>")
    result = cli("templates", "preview", "--app", str(app.id), "--kind", "verify",
                 "--locale", "de", "--to", "Qa@Example.com")
    assert result.exit_code == 0, result.output
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    [message] = smtp.messages
    assert message.rcpt_tos == ["qa@example.com"]
    assert message.message["Subject"] == "[Vorschau] Willkommen"
    assert re.search(r"/preview\?token=preview-redeems-nothing 000000", message.text)
    # A kind without the app's template: the built-in one, in the brand.
    cli("templates", "preview", "--app", str(app.id), "--kind", "reset", "--locale", "fr",
        "--to", "qa@example.com")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    built_in = smtp.messages[1]
    assert built_in.message["Subject"] == "[Aperçu] Réinitialisez votre mot de passe"
    assert "Shop Brand" in built_in.text


@pytest.mark.parametrize(("tag", "language"), [("ja", "ja"), ("de-AT", "de-AT")])
def test_a_preview_in_a_tag_authsvc_does_not_ship_uses_the_apps_template_for_it(
        cli, conn, database_url, settings, smtp, svc, tag, language):
    """The preview looks the template up as a real email would: a template stored under a
    tag with no shipped catalog of its own (`ja`, `de-AT`) is the one it shows."""
    app, _key = register_app(conn, "Shop", [])
    for stored, words in ((tag, "Eigen"), ("de", "Hallo")):
        app_templates.put_template(conn, app.id, "verify", stored, subject=words,
                                   text="{{ link }} {{ code }}",
                                   html="<p>{{ link }} {{ code }}</p>")
    result = cli("templates", "preview", "--app", str(app.id), "--kind", "verify",
                 "--locale", tag, "--to", "qa@example.com")
    assert result.exit_code == 0, result.output
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    [message] = smtp.messages
    assert message.message["Subject"].endswith("] Eigen"), message.message["Subject"]
    assert message.message["Content-Language"] == language


@pytest.mark.parametrize("args", [
    ("--app", "nope", "--kind", "verify", "--locale", "de", "--to", "a@example.com"),
    ("--app", "00000000-0000-0000-0000-000000000000", "--kind", "verify", "--locale", "de",
     "--to", "a@example.com"),
    ("--app", "APP", "--kind", "password_changed", "--locale", "de", "--to", "a@example.com"),
    ("--app", "APP", "--kind", "verify", "--locale", "not a tag", "--to", "a@example.com"),
    ("--app", "APP", "--kind", "verify", "--locale", "de", "--to", "not an address"),
    ("--app", "REVOKED", "--kind", "verify", "--locale", "de", "--to", "a@example.com"),
])
def test_bad_preview_input_is_a_clear_error(cli, conn, args):
    app, _key = register_app(conn, "Shop", [])
    gone, _key = register_app(conn, "Gone", [])
    revoke_app(conn, gone.id)
    named = [str(app.id) if a == "APP" else str(gone.id) if a == "REVOKED" else a for a in args]
    result = cli("templates", "preview", *named)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[-1].startswith("Error:")
    assert conn.execute("SELECT count(*) FROM email_jobs").fetchone() == (0,)
