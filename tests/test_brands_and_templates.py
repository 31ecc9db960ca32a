"""An app's brand and its own templates (SPEC §14), through the API and into the emails.

Two keys throughout: what one app sets reaches only its own accounts, and no
app reads or changes another's brand or templates.
"""

from __future__ import annotations

import psycopg
import pytest
from flask.testing import FlaskClient

from authsvc.apps.keys import register_app, revoke_app
from authsvc.config import Settings
from authsvc.services import Services
from testkit.smtp_double import Received, SmtpDouble
from tests.api_support import ApiCaller, assert_problem
from tests.pages_support import submit
from tests.worker_support import worker

ANN = "ann@example.com"
TEXT = "{{ product_name }} says hi to {{ email }}: {{ link }} code {{ code }}\n"
HTML = "<p>{{ product_name }}: <a href=\"{{ link }}\">go</a> {{ code }}</p>"
TEMPLATE = {"subject": "Hallo from {{ product_name }}", "text": TEXT, "html": HTML}


class Mailbox:
    """Runs the worker once per look and returns what it sent since the last look."""

    def __init__(self, database_url: str, settings: Settings, svc: Services,
                 smtp: SmtpDouble) -> None:
        self.database_url, self.settings, self.svc, self.smtp = database_url, settings, svc, smtp
        self.seen = 0

    def one(self) -> Received:
        worker(self.database_url, self.settings, self.smtp.url, self.svc.clock, once=True).run()
        [message] = self.smtp.messages[self.seen:]
        self.seen = len(self.smtp.messages)
        return message


@pytest.fixture
def mailbox(database_url: str, settings: Settings, svc: Services, smtp: SmtpDouble) -> Mailbox:
    return Mailbox(database_url, settings, svc, smtp)


@pytest.fixture
def other(api: ApiCaller, conn: psycopg.Connection) -> ApiCaller:
    app, key = register_app(conn, "Other Corp", ["https://other.example/welcome"])
    return ApiCaller(api.client, app, key)


def _html(message: Received) -> str:
    body = message.message.get_body(preferencelist=("html",))
    assert body is not None
    return str(body.get_content())


def _brand(api: ApiCaller, **fields: object) -> dict:
    response = api.call("PATCH", "/app", fields)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


# --- the brand through the API ------------------------------------------------------


def test_an_app_reads_and_changes_only_its_own_brand(api, other):
    assert api.call("GET", "/app").get_json()["product_name"] is None
    changed = _brand(api, product_name="Shop", logo_url="https://shop.example/l.png",
                     brand_color="#AA3300", support_url="https://shop.example/help",
                     default_locale="pt_br")
    assert changed["brand_color"] == "#aa3300" and changed["default_locale"] == "pt-BR"
    assert changed["id"] == str(api.app.id)
    assert other.call("GET", "/app").get_json()["product_name"] is None
    _brand(api, logo_url=None)
    assert api.call("GET", "/app").get_json()["logo_url"] is None
    assert api.call("GET", "/app").get_json()["product_name"] == "Shop"


@pytest.mark.parametrize(("field", "value"), [
    ("product_name", "x" * 65), ("product_name", ""), ("product_name", "Shop\r\nBcc: x"),
    ("product_name", "Shop\x00"), ("product_name", "Shop\u200b"), ("product_name", "Sh\top"),
    ("logo_url", "http://shop.example/l.png"), ("logo_url", "javascript:alert(1)"),
    ("brand_color", "red"), ("brand_color", "#12345"), ("support_url", "ftp://x.example"),
    ("default_locale", "not a tag"), ("product_name", 7), ("mail_from", "a@b.example"),
    ("nope", "x"),
    # The stored rule (migration 0034's CHECKs) reads the scheme as written: an upper-case
    # one, or a port past 65535, is refused here rather than by the database (a 500).
    ("logo_url", "HTTPS://shop.example/l.png"), ("support_url", "Http://shop.example/help"),
    ("logo_url", "https://shop.example:99999/l.png"),
])
def test_bad_brand_fields_are_400_naming_the_field(api, field, value):
    body = assert_problem(api.call("PATCH", "/app", {field: value}), 400, "invalid_request")
    assert body["errors"][0]["pointer"] == f"#/{field}"


# The direction controls: embeddings and overrides, then isolates.
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_a_product_name_with_direction_controls_is_kept_but_reorders_no_email(api, mailbox):
    """A name may hold direction controls (a right-to-left brand may need them); it is
    stored as sent, and every email shows it without them, escaped, the built-in frame
    isolating it (<bdi>): the subject, the text part and the HTML part."""
    name = "<script>x</script>\u202eevil\u2067Shop\u2069\u202a"
    assert _brand(api, product_name=name)["product_name"] == name
    assert api.call("GET", "/app").get_json()["product_name"] == name
    api.sign_up(ANN)
    built_in = mailbox.one()
    shown = "&lt;script&gt;x&lt;/script&gt; evil Shop"
    assert f"<bdi>{shown}</bdi>" in _html(built_in)
    assert api.call("PUT", "/templates/verify/en", TEMPLATE).status_code == 200
    api.post("/verifications", {"email": ANN})
    own = mailbox.one()
    assert own.message["Subject"] == "Hallo from <script>x</script> evil Shop"
    assert own.text.startswith("<script>x</script> evil Shop says hi")
    assert _html(own).startswith('<!doctype html>') and f"<p>{shown}: <a" in _html(own)
    for message in (built_in, own):
        for part in (message.message["Subject"], message.text, _html(message)):
            assert not set(BIDI_CONTROLS) & set(part), part
        assert "<script>" not in _html(message)


def test_a_revoked_key_reads_and_changes_nothing(api, conn):
    revoke_app(conn, api.app.id)
    assert_problem(api.call("GET", "/app"), 401, "unauthorized")
    assert_problem(api.call("PATCH", "/app", {"product_name": "X"}), 401, "unauthorized")
    assert_problem(api.call("GET", "/templates"), 401, "unauthorized")
    assert_problem(api.call("PUT", "/templates/verify/de", TEMPLATE), 401, "unauthorized")


# --- templates through the API ------------------------------------------------------


def test_templates_are_stored_listed_previewed_and_deleted_per_app(api, other):
    stored = api.call("PUT", "/templates/verify/DE", TEMPLATE)
    assert stored.status_code == 200 and stored.get_json()["locale"] == "de"
    assert [t["kind"] for t in api.call("GET", "/templates").get_json()["templates"]] == [
        "verify"]
    assert other.call("GET", "/templates").get_json()["templates"] == []
    assert_problem(other.call("DELETE", "/templates/verify/de"), 404, "template_not_found")
    assert_problem(other.call("POST", "/templates/verify/de/preview", {}), 404,
                   "template_not_found")
    preview = api.call("POST", "/templates/verify/de/preview", {}).get_json()
    assert preview["subject"].startswith("Hallo from ")
    assert "preview-redeems-nothing" in preview["text"] and '<html lang="de"' in preview["html"]
    draft = api.call("POST", "/templates/verify/de/preview",
                     {**TEMPLATE, "subject": "Draft {{ email|upper }}"}).get_json()
    assert draft["subject"] == "Draft PERSON@EXAMPLE.COM"
    assert api.call("DELETE", "/templates/verify/de").status_code == 204
    assert api.call("GET", "/templates").get_json()["templates"] == []


@pytest.mark.parametrize("tag", ["x-private", "i-klingon", "zh-yue-HK", "deutsch-DE",
                                 "de-DE-x-phonebk"])
def test_every_well_formed_tag_is_taken_by_the_api(api, tag):
    """RFC 5646's whole syntax is well-formed: a request, a template and a brand take it."""
    response = api.post("/signups", {"email": ANN, "password": "correct horse battery",
                                     "locale": tag})
    assert response.status_code == 202, response.get_json()
    assert api.call("PUT", f"/templates/verify/{tag}", TEMPLATE).status_code == 200
    # A default in a shipped language is kept as that locale, as `pt_br` is.
    assert _brand(api, default_locale=tag)["default_locale"] in (tag, "de")


def test_a_preview_without_a_body_previews_the_stored_template(api):
    """No body at all (no Content-Type), or an empty one: the stored template, as `{}`."""
    assert_problem(api.call("POST", "/templates/verify/de/preview"), 404, "template_not_found")
    assert api.call("PUT", "/templates/verify/de", TEMPLATE).status_code == 200
    for extra in ({}, {"headers": {"Content-Length": "0"}},
                  {"data": b"", "content_type": "application/json"},
                  {"data": b"", "content_type": "text/plain"}):
        preview = api.call("POST", "/templates/verify/de/preview", **extra)
        assert preview.status_code == 200, (extra, preview.get_json())
        assert preview.get_json()["subject"].startswith("Hallo from ")
    refused = api.call("POST", "/templates/verify/de/preview", data=b"subject=x",
                       content_type="text/plain")
    assert_problem(refused, 415, "unsupported_media_type")
    assert_problem(api.call("POST", "/templates/verify/de/preview", data=b" ",
                            content_type="application/json"), 400, "invalid_request")


def test_unknown_kinds_and_malformed_locales_are_refused(api):
    assert_problem(api.call("PUT", "/templates/password_changed/de", TEMPLATE), 404, "not_found")
    assert_problem(api.call("PUT", "/templates/verify/no%20tag", TEMPLATE), 400,
                   "invalid_request")
    assert_problem(api.call("PUT", "/templates/verify/de", {"subject": "x"}), 400,
                   "invalid_request")


# The sandbox: each is refused at upload with 422 template_invalid naming the line.
ATTACKS = [
    "{{ ''.__class__.__mro__ }}", "{{ config }}", "{{ self }}", "{{ lipsum.__globals__ }}",
    "{{ cycler.__init__ }}", "{{ range(10) }}", "{% for x in 'ab' %}{{ x }}{% endfor %}",
    "{% macro m() %}x{% endmacro %}", "{% include 'verify.txt' %}", "{% import 'x' as y %}",
    "{% extends 'x' %}", "{% block b %}{% endblock %}", "{% set x = 1 %}",
    "{{ 'x' * 10**9 }}", "{{ link ~ link ~ link }}", "{{ '%s' % link }}", "{{ link[0] }}",
    "{{ link.upper() }}", "{{ link|attr('x') }}", "{{ link|format('x') }}",
    "{{ link if code else code }}", "{% if link is defined %}x{% endif %}", "{{ [1, 2] }}",
    "{% filter upper %}x{% endfilter %}", "{{ link|default(link) }}", "{{ 'x'|center(9999) }}",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_sandbox_escapes_are_refused_at_upload_with_the_line(api, attack):
    text = "ok {{ link }} {{ code }}\nline two\n" + attack + "\n"
    body = assert_problem(api.call("PUT", "/templates/reset/en", {**TEMPLATE, "text": text}),
                          422, "template_invalid")
    assert body["errors"][0]["pointer"] == "#/text"
    assert body["errors"][0]["detail"].startswith("line 3: "), body


@pytest.mark.parametrize(("part", "source", "reason", "line"), [
    ("text", "no link here {{ code }}", "must print {{ link }}", 1),
    # A missing variable is missing from the whole part: its last line is named.
    ("html", "<p>\n{{ link }} but no code\n</p>\n", "must print {{ code }}", 3),
    ("html", "{% if code %}{{ link }} {{ code }}{% endif %}", "must print", 1),
    ("text", "hi\n{{ link|upper }} {{ code }}", "must print {{ link }} as is", 2),
    ("text", "{{ link }}\n{{ code }}\n{{ unknown }}", "unknown variable 'unknown'", 3),
    ("text", "{{ link }} {{ code }} {% if %}", "line 1", 1),
])
def test_templates_that_leave_link_or_code_out_or_do_not_parse_are_refused(
        api, part, source, reason, line):
    body = assert_problem(api.call("PUT", "/templates/reset/en", {**TEMPLATE, part: source}),
                          422, "template_invalid")
    assert reason in body["detail"] + body["errors"][0]["detail"]
    assert body["errors"][0]["detail"].startswith(f"line {line}: "), body
    assert f"{part}, line {line}: " in body["detail"]


def test_a_template_over_64_kib_is_refused_naming_line_1(api):
    big = {**TEMPLATE, "html": HTML + "x" * (64 * 1024)}
    body = assert_problem(api.call("PUT", "/templates/reset/en", big), 422, "template_invalid")
    assert body["errors"][0]["detail"].startswith("line 1: "), body


# --- into the emails ---------------------------------------------------------------


def test_an_own_account_gets_the_apps_brand_locale_template_and_sender(
        api, conn, mailbox, svc):
    _brand(api, product_name="Shop <script>alert(1)</script>", brand_color="#aa3300",
           logo_url="https://shop.example/logo.png", support_url="https://shop.example/help")
    conn.execute("UPDATE apps SET mail_from = 'Shop Team <hello@shop.example>' WHERE id = %s",
                 (api.app.id,))
    api.sign_up(ANN)  # a built-in template, in the app's brand
    message = mailbox.one()
    assert message.message["From"] == "Shop Team <hello@shop.example>"
    html = _html(message)
    assert "<script>" not in html and "Shop &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<img src="https://shop.example/logo.png"' in html and "#aa3300" in html
    assert "logo.png" not in message.text and "https://shop.example/help" in message.text
    token = next(w for w in message.text.split() if "token=" in w).split("token=")[1]
    assert svc.tokens.read(token, "verify").brand_app_id == api.app.id
    # The app's own template for German, asked in the request.
    assert api.call("PUT", "/templates/reset/de", TEMPLATE).status_code == 200
    api.post("/password-resets", {"email": ANN, "locale": "de-AT"})
    reset = mailbox.one()
    assert reset.message["Content-Language"] == "de"
    assert reset.message["Subject"] == "Hallo from Shop <script>alert(1)</script>"
    assert reset.text.startswith("Shop <script>alert(1)</script> says hi to ann@example.com")
    assert "&lt;script&gt;" in _html(reset) and "<script>" not in _html(reset)


def test_another_apps_request_for_an_own_account_gets_the_service_brand_naming_it(
        api, other, mailbox):
    _brand(api, product_name="Shop", logo_url="https://shop.example/logo.png")
    assert api.call("PUT", "/templates/reset/en", TEMPLATE).status_code == 200
    _brand(other, product_name="Other Brand", support_url="https://other.example/help")
    assert other.call("PUT", "/templates/reset/en", TEMPLATE).status_code == 200
    api.sign_up(ANN)
    mailbox.one()
    other.post("/password-resets", {"email": ANN,
                                    "redirect_url": "https://other.example/welcome"})
    message = mailbox.one()
    assert "Other Corp" in message.text  # named, as the app that asked
    for foreign in ("other.example", "Other Brand", "Shop", "says hi"):
        assert foreign not in message.text and foreign not in _html(message), foreign
    assert message.message["From"] == "authsvc <no-reply@localhost>"


def test_notices_that_protect_the_person_keep_built_in_bodies_under_the_brand(api, mailbox):
    _brand(api, product_name="Shop Brand")
    for kind in ("verify", "reset"):
        assert api.call("PUT", f"/templates/{kind}/en", TEMPLATE).status_code == 200
    api.sign_up(ANN)
    verify = mailbox.one()
    assert verify.text.startswith("Shop Brand says hi")  # the app's template
    token = next(w for w in verify.text.split() if "token=" in w).split("token=")[1]
    assert api.post("/verifications/confirm", {"token": token}).status_code == 200
    api.post("/password-resets", {"email": ANN})
    reset = mailbox.one()
    assert reset.text.startswith("Shop Brand says hi")
    token = next(w for w in reset.text.split() if "token=" in w).split("token=")[1]
    assert api.post("/password-resets/confirm",
                    {"token": token, "password": "another good passphrase"}).status_code == 200
    notice = mailbox.one()
    assert notice.message["Subject"] == "Your password was changed"  # the built-in body
    assert "says hi" not in notice.text and "Shop Brand" in notice.text  # the app's brand


def test_a_template_failing_at_render_falls_back_to_the_built_in_one(api, conn, mailbox,
                                                                     caplog):
    # Written past the API (no upload would take it): the worker checks it again.
    api.sign_up(ANN)
    mailbox.one()
    conn.execute(
        "INSERT INTO app_templates (app_id, kind, locale, subject, text_body, html_body)"
        " VALUES (%s, 'verify', 'en', 's', %s, %s)",
        (api.app.id, "{% for x in y %}{% endfor %}{{ link }}{{ code }}", HTML))
    api.post("/verifications", {"email": ANN})
    message = mailbox.one()
    assert "Confirm that this address is yours" in message.text  # the built-in one went
    # Refused when the worker loaded the app's look, so never tried on an email.
    [refused] = [r for r in caplog.records if r.getMessage() == "app_template_refused"]
    assert refused.kind == "verify"  # type: ignore[attr-defined]


def test_a_template_over_the_output_bound_falls_back_logged_with_the_job(
        api, conn, mailbox, caplog):
    api.sign_up(ANN)
    mailbox.one()
    growth = "{{ link }}" * 6000 + "{{ code }}"  # within 64 KiB, well over 256 KiB out
    assert api.call("PUT", "/templates/verify/en", {**TEMPLATE, "text": growth}).status_code \
        == 200
    api.post("/verifications", {"email": ANN})
    assert "Confirm that this address is yours" in mailbox.one().text
    [failed] = [r for r in caplog.records if r.getMessage() == "app_template_failed"]
    job_id = conn.execute("SELECT max(id) FROM email_jobs WHERE template = 'verify'").fetchone()
    assert (failed.job_id, failed.kind) == (job_id[0], "verify")  # type: ignore[attr-defined]
    assert "RenderLimit" in failed.error  # type: ignore[attr-defined]


# --- locales -----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/signups", "/verifications", "/password-resets",
                                  "/sign-in-links", "/account-deletions", "/email-changes"])
def test_a_malformed_locale_is_400_on_every_email_sending_request(api, path):
    body = {"email": ANN, "password": "correct horse battery", "new_email": "b@example.com",
            "locale": "not a tag!"}
    fields = {"/verifications": ("email",), "/password-resets": ("email",),
              "/sign-in-links": ("email",)}.get(path, ("email", "password"))
    sent = {k: v for k, v in body.items() if k in (*fields, "locale")
            or (path == "/email-changes" and k == "new_email")}
    response = api.post(path, sent)
    problem = assert_problem(response, 400, "invalid_request")
    assert problem["errors"][0]["pointer"] == "#/locale"


def _locale_of(conn: psycopg.Connection, email: str) -> str | None:
    row = conn.execute("SELECT locale FROM users WHERE email = %s", (email,)).fetchone()
    return row[0] if row else None


def test_the_account_keeps_its_signups_locale_and_its_latest_redeemed_links(
        api, other, conn, mailbox, svc):
    api.post("/signups", {"email": ANN, "password": "correct horse battery", "locale": "fr"})
    assert mailbox.one().message["Content-Language"] == "fr"
    assert _locale_of(conn, ANN) == "fr"
    # Another app's request in Arabic: the email is Arabic, the account stays French.
    other.post("/password-resets", {"email": ANN, "locale": "ar"})
    arabic = mailbox.one()
    assert arabic.message["Content-Language"] == "ar"
    assert 'dir="rtl"' in _html(arabic) and 'lang="ar"' in _html(arabic)
    assert _locale_of(conn, ANN) == "fr"
    # No locale asked: the account's.
    api.post("/verifications", {"email": ANN})
    assert mailbox.one().message["Content-Language"] == "fr"
    # Redeeming a Spanish link makes the account Spanish; unsupported tags fall back.
    api.post("/password-resets", {"email": ANN, "locale": "es-MX"})
    spanish = mailbox.one()
    assert spanish.message["Content-Language"] == "es"
    token = next(w for w in spanish.text.split() if "token=" in w).split("token=")[1]
    assert api.post("/password-resets/confirm",
                    {"token": token, "password": "another good passphrase"}).status_code == 200
    assert _locale_of(conn, ANN) == "es"
    notice = mailbox.one()  # "your password was changed", in the account's new locale
    assert notice.message["Content-Language"] == "es"
    assert "contraseña" in notice.message["Subject"]
    # A tag not shipped even by its language: the app's default, else en (SPEC §14's
    # chain for an unsupported one), never the account's.
    api.post("/password-resets", {"email": ANN, "locale": "ja"})
    assert mailbox.one().message["Content-Language"] == "en"
    _brand(api, default_locale="de")
    api.post("/password-resets", {"email": ANN, "locale": "ja"})
    assert mailbox.one().message["Content-Language"] == "de"
    api.post("/password-resets", {"email": ANN})  # none asked: the account's first
    assert mailbox.one().message["Content-Language"] == "es"


def test_the_asking_apps_default_locale_comes_after_the_request_and_the_account(
        api, other, conn, mailbox):
    _brand(api, default_locale="pt-BR")
    api.sign_up(ANN)
    message = mailbox.one()
    assert message.message["Content-Language"] == "pt-BR"
    assert "Confirme" in message.message["Subject"]
    _brand(other, default_locale="de", product_name="Other Brand")
    other.post("/password-resets", {"email": ANN})  # not its account: its default, our brand
    reset = mailbox.one()
    assert reset.message["Content-Language"] == "de" and "Other Brand" not in reset.text
    conn.execute("UPDATE users SET locale = 'fr' WHERE email = %s", (ANN,))
    other.post("/password-resets", {"email": ANN})
    assert mailbox.one().message["Content-Language"] == "fr"  # the account's first


def test_an_operators_account_never_gets_an_apps_brand_or_template(api, conn, mailbox):
    _brand(api, product_name="Shop Brand", default_locale="de")
    assert api.call("PUT", "/templates/verify/de", TEMPLATE).status_code == 200
    api.sign_up(ANN)
    assert mailbox.one().text.startswith("Shop Brand")  # the app's own account, for now
    conn.execute("INSERT INTO operators (user_id) SELECT id FROM users WHERE email = %s", (ANN,))
    api.post("/verifications", {"email": ANN})
    message = mailbox.one()
    assert "Shop Brand" not in message.text and "says hi" not in message.text
    assert message.message["From"] == "authsvc <no-reply@localhost>"


def test_an_operators_account_never_gets_an_apps_redirect(api, conn, mailbox, settings):
    """An operator who once signed up through an app: that app asking a reset with its
    redirect must not receive the operator's token on its own site (the console's keys)."""
    from tests.api_support import ALLOWED_REDIRECT
    api.sign_up(ANN)
    mailbox.one()
    conn.execute("INSERT INTO operators (user_id) SELECT id FROM users WHERE email = %s", (ANN,))
    assert api.post("/password-resets", {"email": ANN, "redirect_url": ALLOWED_REDIRECT}
                    ).status_code == 202
    message = mailbox.one()
    assert message.link.startswith(f"{settings.base_url}/reset/confirm?token="), message.link
    assert "allowed.example.com" not in message.text + message.html


def _choose_language(client: FlaskClient, how: str, tag: str) -> str:
    """Make `tag` this browser's language the way a person does; the query to add."""
    if how == "query":
        return f"?lang={tag}"
    if how == "cookie":
        client.set_cookie("lang", tag)
    else:
        client.environ_base["HTTP_ACCEPT_LANGUAGE"] = f"{tag},en;q=0.5"
    return ""


@pytest.mark.parametrize("how", ["query", "cookie", "accept_language"])
def test_page_flows_queue_their_emails_in_the_pages_locale(client, conn, how):
    """The language a page is in is the language of the emails its forms queue, and a
    new account keeps it, however the person chose it (SPEC §14)."""
    query = _choose_language(client, how, "de")
    submit(client, f"/signup{query}", {"email": ANN, "password": "correct horse battery"})
    submit(client, f"/reset{query}", {"email": ANN})
    rows = conn.execute("SELECT template, payload ->> 'locale' FROM email_jobs"
                        " WHERE recipient = %s ORDER BY id", (ANN,)).fetchall()
    assert rows == [("verify", "de"), ("reset", "de")]
    assert _locale_of(conn, ANN) == "de"


def test_a_page_in_no_chosen_language_leaves_the_email_to_the_account(client, conn, svc):
    """A page nobody chose a language for (no query, cookie or Accept-Language) asks for
    none: the email takes the account's locale, as an API request without one would."""
    submit(client, "/signup?lang=fr", {"email": ANN, "password": "correct horse battery"})
    fresh = client.application.test_client()
    submit(fresh, "/reset", {"email": ANN})
    assert _queued_locale(conn, "reset") is None
    assert _locale_of(conn, ANN) == "fr"


def test_a_strangers_page_requests_never_change_the_accounts_locale(client, conn):
    """Anyone can ask, from a page in any language, a reset or a second signup for someone
    else's address: the email they queue is in that language, but the account keeps its
    own until its holder redeems a link (SPEC §14: a request alone never changes it)."""
    submit(client, "/signup?lang=fr", {"email": ANN, "password": "correct horse battery"})
    stranger = client.application.test_client()
    submit(stranger, "/reset?lang=ar", {"email": ANN})
    submit(stranger, "/signup?lang=ar", {"email": ANN, "password": "another horse battery"})
    assert _queued_locale(conn, "reset") == "ar"
    assert _locale_of(conn, ANN) == "fr"


def test_a_template_in_a_language_authsvc_does_not_ship_serves_the_apps_default(api, mailbox):
    _brand(api, default_locale="ja", support_url="https://shop.example/help")
    japanese = {"subject": "ご確認", "text": "{{ link }} {{ code }} {{ locale }}",
                "html": "<p>{{ link }} {{ code }}</p>"}
    assert api.call("PUT", "/templates/verify/ja", japanese).status_code == 200
    api.sign_up(ANN)  # no request locale, no account locale: the app's default, ja
    message = mailbox.one()
    assert message.message["Subject"] == "ご確認"
    assert message.message["Content-Language"] == "ja" and message.text.endswith(" ja")


def test_the_apps_template_for_the_requested_tag_comes_before_its_languages(api, mailbox):
    """SPEC §14's lookup: the app's template for the request's locale, then for its
    language. A regional tag, or one authsvc ships no catalog for, is still the app's."""
    for tag, words in (("de-AT", "Servus"), ("de", "Hallo"), ("ja", "こんにちは")):
        body = {"subject": words, "text": words + " {{ link }} {{ code }}",
                "html": f"<p>{words} {{{{ link }}}} {{{{ code }}}}</p>"}
        assert api.call("PUT", f"/templates/verify/{tag}", body).status_code == 200
    for tag, words, language in (("de-AT", "Servus", "de-AT"), ("de-CH", "Hallo", "de"),
                                 ("ja-JP", "こんにちは", "ja"), ("ja", "こんにちは", "ja")):
        address = f"{tag.lower()}@example.com"
        response = api.post("/signups", {"email": address, "password": "a good passphrase 1",
                                         "locale": tag})
        assert response.status_code == 202, response.get_json()
        message = mailbox.one()
        # Tags are case-insensitive; a stored regional one is kept in lower case.
        assert (message.message["Subject"], message.message["Content-Language"].lower()) \
            == (words, language.lower()), tag


def test_an_apps_look_that_cannot_be_read_retries_the_email_rather_than_unbrand_it(
        api, conn, settings, svc, smtp):
    """The database the looks come from is away when the worker meets an app's own
    account: the email waits for a retry; it never goes out in the service's brand."""
    from authsvc.emails.looks import AppLooks, LooksUnavailable
    from authsvc.services import token_codec
    from authsvc.worker.loop import Worker, WorkerOptions
    from authsvc.worker.render import Renderer
    from tests.worker_support import smtp_factory

    _brand(api, product_name="Shop Brand")
    api.sign_up(ANN)

    def away(app_id: object) -> object:
        raise LooksUnavailable("connection refused")

    renderer = Renderer(settings, token_codec(settings, svc.clock), svc.clock,
                        looks=AppLooks(away, ttl=0.0))  # type: ignore[arg-type]
    Worker(settings.database_url, renderer, smtp_factory(smtp.url),
           WorkerOptions(once=True)).run()
    assert smtp.messages == []
    status, attempts, error = conn.execute(
        "SELECT status, attempt_count, last_error FROM email_jobs WHERE template = 'verify'"
    ).fetchone()
    assert (status, attempts) == ("pending", 1) and "connection refused" in error


# --- the confirms that send a notice take `locale` too ------------------------------

_CONFIRMS = {
    "/password-resets/confirm": {"token": "x", "password": "correct horse battery"},
    "/email-changes/confirm": {"token": "x"},
    "/email-changes/approve": {"token": "x"},
    "/email-changes/undo": {"token": "x"},
}


@pytest.mark.parametrize("path", sorted(_CONFIRMS))
def test_a_malformed_locale_is_400_on_every_confirm_that_sends_a_notice(api, path):
    response = api.post(path, {**_CONFIRMS[path], "locale": "not a tag!"})
    problem = assert_problem(response, 400, "invalid_request")
    assert [e["pointer"] for e in problem["errors"]] == ["#/locale"]
    assert "BCP 47" in problem["errors"][0]["detail"]  # judged, not an unknown field
    well_formed = api.post(path, {**_CONFIRMS[path], "locale": "de"})
    assert_problem(well_formed, 400, "invalid_token")  # the link is what is wrong


def _token_in(message: Received) -> str:
    return next(w for w in message.text.split() if "token=" in w).split("token=")[1]


def test_a_reset_confirms_locale_is_its_notices_while_the_account_takes_the_links(
        api, conn, mailbox):
    api.post("/signups", {"email": ANN, "password": "correct horse battery", "locale": "fr"})
    mailbox.one()
    api.post("/password-resets", {"email": ANN, "locale": "es"})
    token = _token_in(mailbox.one())
    confirmed = api.post("/password-resets/confirm", {
        "token": token, "password": "another good passphrase", "locale": "de"})
    assert confirmed.status_code == 200, confirmed.get_json()
    notice = mailbox.one()  # "your password was changed", in the confirm's locale
    assert notice.message["Content-Language"] == "de"
    assert _locale_of(conn, ANN) == "es"  # the redeemed link's, never the confirm's


def _queued_locale(conn: psycopg.Connection, template: str) -> str | None:
    row = conn.execute("SELECT payload ->> 'locale' FROM email_jobs WHERE template = %s"
                       " ORDER BY id DESC LIMIT 1", (template,)).fetchone()
    assert row is not None, template
    return row[0]


def test_a_change_confirm_and_its_undo_queue_their_notices_in_their_locale(api, conn, svc):
    from tests.address_life_support import change_link, confirmed, request_change, undo_link
    from tests.api_support import SIGNUP_PASSWORD
    confirmed(api, conn, svc, ANN)
    request_change(api, ANN, SIGNUP_PASSWORD, "ann.new@example.com")
    changed = api.post("/email-changes/confirm", {
        "token": change_link(conn, svc, "ann.new@example.com"), "locale": "pt-br"})
    assert changed.status_code == 200, changed.get_json()
    assert _queued_locale(conn, "email_changed") == "pt-BR"
    undone = api.post("/email-changes/undo", {"token": undo_link(conn, svc, ANN),
                                              "locale": "ar"})
    assert undone.status_code == 200, undone.get_json()
    assert (_queued_locale(conn, "email_restored"), _queued_locale(conn, "reset")) \
        == ("ar", "ar")
    assert _locale_of(conn, ANN) is None  # a request alone never sets it


def test_another_apps_signup_leaves_an_existing_accounts_empty_locale(api, other, conn):
    api.sign_up(ANN)  # no locale asked: the account has none
    assert _locale_of(conn, ANN) is None
    response = other.post("/signups", {"email": ANN, "password": "correct horse battery",
                                       "locale": "ar"})
    assert response.status_code == 202
    api.post("/signups", {"email": ANN, "password": "correct horse battery", "locale": "de"})
    assert _locale_of(conn, ANN) is None  # only the signup that created it sets it


def test_the_reset_pages_queue_their_notices_in_the_pages_locale(client, conn, svc):
    from tests.link_support import latest_code, latest_link
    from tests.pages_support import submit_on_link_page
    submit(client, "/signup?lang=fr", {"email": ANN, "password": "correct horse battery"})
    submit(client, "/reset", {"email": ANN})  # the cookie keeps French
    client.set_cookie("lang", "de")
    done = submit_on_link_page(client, "/reset/confirm", "/reset/confirm",
                               latest_link(conn, svc, ANN, "reset"),
                               password="another good passphrase")
    assert done.status_code == 303
    assert _queued_locale(conn, "password_changed") == "de"
    assert _locale_of(conn, ANN) == "fr"  # the redeemed link's, not the page's
    submit(client, "/reset?lang=fr", {"email": ANN})
    client.delete_cookie("lang")
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "es-MX,es;q=0.9"
    done = submit(client, "/reset/code", {"email": ANN, "code": latest_code(
        conn, svc, ANN, "reset"), "password": "a third good passphrase"})
    assert done.status_code == 303
    assert _queued_locale(conn, "password_changed") == "es"
    assert _locale_of(conn, ANN) == "fr"
