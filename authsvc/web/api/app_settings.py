"""The calling app's own settings (SPEC §14): its brand (/app) and its email templates
(/templates). Every call reads or changes only the app whose key made it."""

from __future__ import annotations

from typing import Any

from flask import Response, request

from authsvc.apps import brands
from authsvc.emails import app_templates, sandbox
from authsvc.emails.app_templates import StoredTemplate
from authsvc.emails.preview import preview_parts
from authsvc.web.api.auth import current_caller
from authsvc.web.api.problems import ApiProblem, invalid_request, problem_reply
from authsvc.web.api.replies import Reply, json_reply
from authsvc.web.api.requests import (
    TEMPLATE_BODY,
    TEMPLATE_DRAFT,
    BodySpec,
    parse_body,
    read_json_object,
)
from authsvc.web.api.views import bp
from authsvc.web.plumbing import db, services

# Flask's converter for a template kind: any other kind is 404 not_found.
KIND = "<any(" + ", ".join(app_templates.KINDS) + "):kind>"


def _brand_document() -> dict[str, Any]:
    app = current_caller().app
    fields = brands.brand_fields(db(), app.id) or {}
    return {"id": str(app.id), "name": app.name,
            **{name: fields.get(name) for name in (*brands.APP_FIELDS, "mail_from")}}


@bp.get("/app")
def get_app() -> Response:
    """The calling app's brand as set (null: the service's own)."""
    return json_reply(200, _brand_document()).to_response()


@bp.patch("/app")
def patch_app() -> Response:
    """Change some of the calling app's brand fields; null clears one."""
    document = read_json_object()
    changes: dict[str, str | None] = {}
    for name, value in document.items():
        if name not in brands.APP_FIELDS:
            detail = ("is set by operators only (authsvc apps update --mail-from)"
                      if name == "mail_from" else "is not a known field")
            raise invalid_request("/" + name, detail)
        try:
            changes[name] = brands.check_brand_field(name, value)
        except brands.InvalidBrand as exc:
            raise invalid_request("/" + name, str(exc)) from None
    conn = db()
    with conn.transaction():
        brands.update_brand(conn, current_caller().app.id, changes)
    return json_reply(200, _brand_document()).to_response()


def _locale(value: str) -> str:
    try:
        return app_templates.template_locale(value)
    except ValueError as exc:
        raise ApiProblem(problem_reply(400, "invalid_request", f"locale: {exc}")) from None


def _template_document(stored: StoredTemplate) -> dict[str, Any]:
    return {"kind": stored.kind, "locale": stored.locale, "subject": stored.subject,
            "text": stored.text, "html": stored.html,
            "updated_at": stored.updated_at.isoformat()}


def _refused(exc: sandbox.TemplateInvalid) -> ApiProblem:
    pointer = "#/" + exc.part if exc.part in ("subject", "text", "html") else "#"
    return ApiProblem(problem_reply(
        422, "template_invalid", str(exc),
        errors=[{"pointer": pointer, "detail": f"line {exc.line}: {exc.reason}"}]))


# A template's body may be larger than other calls' (64 KiB of template, JSON-escaped):
# room for that, so a template over 64 KiB is told why (422), not just 413.
TEMPLATE_BODY_BYTES = 4 * sandbox.MAX_TEMPLATE_BYTES


def _parts(spec: BodySpec) -> dict[str, str | None]:
    request.max_content_length = TEMPLATE_BODY_BYTES
    values, _document = parse_body(spec)
    return values


@bp.get("/templates")
def list_templates() -> Response:
    """Every template of the calling app."""
    stored = app_templates.list_templates(db(), current_caller().app.id)
    return json_reply(200, {"templates": [_template_document(t) for t in stored]}).to_response()


@bp.put(f"/templates/{KIND}/<locale>")
def put_template(kind: str, locale: str) -> Response:
    """Store the calling app's template for a kind and locale (checked first)."""
    tag = _locale(locale)
    values = _parts(TEMPLATE_BODY)
    conn = db()
    app_id = current_caller().app.id
    try:
        with conn.transaction():
            app_templates.put_template(conn, app_id, kind, tag, subject=str(values["subject"]),
                                       text=str(values["text"]), html=str(values["html"]))
    except sandbox.TemplateInvalid as exc:
        raise _refused(exc) from None
    stored = app_templates.get_template(conn, app_id, kind, tag)
    assert stored is not None
    return json_reply(200, _template_document(stored)).to_response()


def _not_found(kind: str, tag: str) -> ApiProblem:
    return ApiProblem(problem_reply(404, "template_not_found",
                                    f"This app has no {kind} template for {tag}."))


@bp.delete(f"/templates/{KIND}/<locale>")
def delete_template(kind: str, locale: str) -> Response:
    """Remove the calling app's template; its emails use the next in the lookup order."""
    tag = _locale(locale)
    conn = db()
    with conn.transaction():
        if not app_templates.delete_template(conn, current_caller().app.id, kind, tag):
            raise _not_found(kind, tag)
    return Reply(204, b"").to_response()


@bp.post(f"/templates/{KIND}/<locale>/preview")
def preview_template(kind: str, locale: str) -> Response:
    """A draft (the body) or the stored template, rendered with sample values."""
    tag = _locale(locale)
    values = _parts(TEMPLATE_DRAFT)
    given = [name for name in ("subject", "text", "html") if values[name] is not None]
    app_id = current_caller().app.id
    conn = db()
    if given and len(given) < 3:
        missing = next(n for n in ("subject", "text", "html") if values[n] is None)
        raise invalid_request("/" + missing, "a draft needs subject, text and html")
    if not given:
        stored = app_templates.get_template(conn, app_id, kind, tag)
        if stored is None:
            raise _not_found(kind, tag)
        values = {"subject": stored.subject, "text": stored.text, "html": stored.html}
    brand = brands.load_brand(conn, app_id, services().settings.product_name)
    try:
        subject, text, html = preview_parts(kind, tag, brand, str(values["subject"]),
                                            str(values["text"]), str(values["html"]),
                                            services().settings.base_url)
    except sandbox.TemplateInvalid as exc:
        raise _refused(exc) from None
    except sandbox.RenderLimit as exc:
        raise _refused(sandbox.TemplateInvalid("template", 1, str(exc))) from None
    return json_reply(200, {"subject": subject, "text": text, "html": html}).to_response()
