"""Apps' templates that parse but would not compile, or cost too much: refused at upload,
and never able to stop the worker when one is stored some other way (SPEC §14)."""

from __future__ import annotations

import threading
from uuid import uuid4

import psycopg
import pytest

from authsvc.apps.brands import Brand
from authsvc.config import Settings
from authsvc.emails import app_templates, looks, sandbox
from authsvc.services import Services
from testkit.smtp_double import SmtpDouble
from tests.api_support import ApiCaller, assert_problem
from tests.worker_support import worker

ANN = "ann@example.com"
HOLES = "{{ link }}{{ code }}"
HTML = "<p><a href=\"{{ link }}\">go</a> {{ code }}</p>"
TEMPLATE = {"subject": "Hi", "text": HOLES + "\n", "html": HTML}


def _nested_ifs(depth: int) -> str:
    return HOLES + "{% if link %}" * depth + "x" + "{% endif %}" * depth


# Each parses (or nearly) but cannot be compiled, or recurses past Python's limit.
DEEP = {
    "100 nested ifs": _nested_ifs(100),
    "400 nested ifs": _nested_ifs(400),
    "3000 elifs": HOLES + "{% if link %}a" + "{% elif link %}a" * 3000 + "{% endif %}",
    "100 nested parentheses": HOLES + "{{ " + "(" * 100 + "link" + ")" * 100 + " }}",
    "1000 nots": HOLES + "{{ " + "not " * 1000 + "link }}",
    "1000 unary minus": HOLES + "{{ " + "-" * 1000 + "link }}",
    "200 filters": HOLES + "{{ link" + "|upper" * 200 + " }}",
}


@pytest.mark.parametrize("source", DEEP.values(), ids=DEEP.keys())
def test_a_template_too_deep_to_compile_is_refused_at_upload(api, source):
    body = assert_problem(api.call("PUT", "/templates/reset/en", {**TEMPLATE, "text": source}),
                          422, "template_invalid")
    assert body["errors"][0]["pointer"] == "#/text"
    assert "nest" in body["errors"][0]["detail"] or "deep" in body["errors"][0]["detail"], body


@pytest.mark.parametrize("source", DEEP.values(), ids=DEEP.keys())
def test_a_draft_too_deep_to_compile_is_refused_by_the_preview(api, source):
    assert_problem(api.call("POST", "/templates/reset/en/preview", {**TEMPLATE, "text": source}),
                   422, "template_invalid")


def test_nesting_up_to_the_limits_is_taken_and_renders(api):
    deep = (HOLES + "{% if link %}" * sandbox.MAX_IF_DEPTH + "{{ "
            + "not " * (sandbox.MAX_EXPRESSION_DEPTH - 2) + "code }}"
            + "{% endif %}" * sandbox.MAX_IF_DEPTH)
    assert api.call("PUT", "/templates/reset/en", {**TEMPLATE, "text": deep}).status_code == 200
    assert api.call("POST", "/templates/reset/en/preview", {}).status_code == 200


def test_an_elif_is_a_branch_at_its_ifs_level_not_one_more():
    chain = "{% if code %}a" + "{% elif link == 'b' %}b" * 20 + "{% else %}c{% endif %}"
    innermost = "{% if link %}" * (sandbox.MAX_IF_DEPTH - 1) + chain + "{% endif %}" * (
        sandbox.MAX_IF_DEPTH - 1)
    sandbox.check_template("s", HOLES + innermost, HTML)
    with pytest.raises(sandbox.TemplateInvalid, match="levels of if"):
        sandbox.check_template("s", HOLES + "{% if link %}" + innermost + "{% endif %}", HTML)


def _store_past_the_api(conn: psycopg.Connection, app_id: object, kind: str, text: str) -> None:
    conn.execute(
        "INSERT INTO app_templates (app_id, kind, locale, subject, text_body, html_body)"
        " VALUES (%s, %s, 'en', 's', %s, %s)", (app_id, kind, text, HTML))


@pytest.mark.parametrize("source", [DEEP["100 nested ifs"], DEEP["3000 elifs"]],
                         ids=["ifs", "elifs"])
def test_a_stored_template_that_cannot_compile_never_stops_the_worker(
        api, conn, database_url: str, settings: Settings, svc: Services, smtp: SmtpDouble,
        caplog, source):
    api.sign_up(ANN)
    _store_past_the_api(conn, api.app.id, "verify", source)
    _store_past_the_api(conn, api.app.id, "reset", source)
    api.post("/verifications", {"email": ANN})
    api.post("/password-resets", {"email": ANN})
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    # Both built-in (the verification replaced the sign-up's pending email), both sent.
    by_subject = {m.message["Subject"]: m.text for m in smtp.messages}
    assert sorted(by_subject) == ["Confirm your email address", "Reset your password"]
    assert "Confirm that this address is yours" in by_subject["Confirm your email address"]
    refused = [r for r in caplog.records if r.getMessage() == "app_template_refused"]
    assert "verify" in {r.kind for r in refused}  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if r.getMessage() == "sender_crashed"]
    status = conn.execute("SELECT array_agg(DISTINCT status) FROM email_jobs").fetchone()
    assert "pending" not in status[0] and "failed" not in status[0], status


def test_the_asking_apps_default_locale_is_read_without_compiling_its_templates(
        api, conn, other: ApiCaller, database_url, settings, svc, smtp, monkeypatch):
    compiled: list[str] = []
    real = looks.app_template

    def counting(kind: str, *args: object, **kwargs: object) -> object:
        compiled.append(kind)
        return real(kind, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(looks, "app_template", counting)
    api.call("PATCH", "/app", {"default_locale": "de"})
    for kind in app_templates.KINDS:
        assert api.call("PUT", f"/templates/{kind}/de", TEMPLATE).status_code == 200
    other.sign_up(ANN)  # an account of Other Corp's; Shop's call below asks for it
    api.post("/password-resets", {"email": ANN})
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    # Ann's verify email went out in the same run, in any order beside the reset.
    [[job]] = conn.execute("SELECT public_id::text FROM email_jobs WHERE template = 'reset'")
    [reset] = [m for m in smtp.messages if m.header("X-Authsvc-Job") == job]
    assert reset.header("Content-Language") == "de"
    assert compiled == []


# --- how often a look compiles ------------------------------------------------


def _stored(kind: str, locale: str) -> app_templates.StoredTemplate:
    from datetime import UTC, datetime
    return app_templates.StoredTemplate(kind, locale, "s", HOLES, HTML, datetime.now(UTC))


def test_a_look_compiles_only_the_templates_looked_up(monkeypatch):
    compiled: list[tuple[str, str]] = []
    real = looks.app_template

    def counting(kind: str, locale: str, *args: object, **kwargs: object) -> object:
        compiled.append((kind, locale))
        return real(kind, locale, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(looks, "app_template", counting)
    brand = Brand("Shop", None, None, None, app_id=uuid4(), default_locale="de")
    look = looks.AppLook.of(brand, [_stored(k, loc) for k in app_templates.KINDS
                                    for loc in ("de", "fr", "en")])
    assert compiled == []
    assert look.template_for("reset", "fr-CA") is not None
    assert look.template_for("reset", "fr") is not None
    assert compiled == [("reset", "fr")]


def test_an_app_is_loaded_by_one_thread_at_a_time():
    app_id = uuid4()
    entered = threading.Event()
    release = threading.Event()
    loads: list[int] = []

    def load(_app_id: object) -> looks.AppLook:
        loads.append(1)
        entered.set()
        release.wait(10)
        return looks.AppLook.of(Brand("Shop", None, None, None, app_id=app_id), [])

    cache = looks.AppLooks(load, ttl=30.0)  # type: ignore[arg-type]
    results: list[looks.AppLook] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(app_id)))
               for _ in range(4)]
    threads[0].start()
    assert entered.wait(10)
    for thread in threads[1:]:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(10)
    assert len(loads) == 1 and len(results) == 4
    assert len({id(r) for r in results}) == 1


@pytest.fixture
def other(api: ApiCaller, conn: psycopg.Connection) -> ApiCaller:
    from authsvc.apps.keys import register_app
    app, key = register_app(conn, "Other Corp", ["https://other.example/welcome"])
    return ApiCaller(api.client, app, key)


# --- how many -----------------------------------------------------------------


def test_an_app_stores_at_most_max_templates(api, conn):
    cap = app_templates.MAX_TEMPLATES_PER_APP
    assert cap == len(app_templates.KINDS) * 16
    tags = [f"en-v{n:04d}" for n in range(cap)]
    for at in range(cap):
        conn.execute(
            "INSERT INTO app_templates (app_id, kind, locale, subject, text_body, html_body)"
            " VALUES (%s, %s, %s, 's', %s, %s)",
            (api.app.id, app_templates.KINDS[at % 5], tags[at], HOLES, HTML))
    body = assert_problem(api.call("PUT", "/templates/verify/de", TEMPLATE), 422,
                          "template_invalid")
    assert f"at most {cap}" in body["detail"]
    # Replacing one it has is still allowed.
    assert api.call("PUT", f"/templates/{app_templates.KINDS[0]}/{tags[0]}",
                    TEMPLATE).status_code == 200
    assert len(api.call("GET", "/templates").get_json()["templates"]) == cap


def test_the_cap_is_in_the_api_document():
    from authsvc.web.api.openapi import openapi_document
    put = openapi_document()["paths"]["/api/v1/templates/{kind}/{locale}"]["put"]
    assert f"at most {app_templates.MAX_TEMPLATES_PER_APP} templates" in put["description"]
