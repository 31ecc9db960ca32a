"""The test inbox's pages for people: recent scopes (live), a scope's messages, one message."""

from __future__ import annotations

import json
from email.utils import format_datetime

from flask import Blueprint, Response, abort, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from authsvc.inbox import link_states, messages, params
from authsvc.inbox.params import BadRequest
from authsvc.web import db, services

# The UI runs one script of its own (live.js, for the live scope list) and
# frames email HTML from its own origin; nothing else may load or run.
UI_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
# The email's own HTML: its inline styles and inline images, never a script,
# a form, or a request to the network (tracking pixels stay dark).
EMAIL_POLICY = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "font-src data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
EVENTS_RETRY_MS = 2000


def _page(template: str, **context: object) -> Response:
    response = Response(render_template(template, **context))
    response.headers["Content-Security-Policy"] = UI_POLICY
    response.headers["Cache-Control"] = "no-store"
    return response


def _scope_or_404(raw: str) -> str:
    try:
        return params.scope(raw)
    except BadRequest:
        abort(404)


def index() -> Response:
    """Recent scopes; live.js keeps the table current from /_inbox/events."""
    scopes = messages.list_scopes(db())
    return _page("inbox/index.html", scopes=scopes, domain=services().settings.test_inbox_domain)


def open_scope() -> ResponseReturnValue:
    """The 'open a scope' form: a GET with ?scope=."""
    raw = request.args.get("scope", "")
    try:
        scope = params.scope(raw)
    except BadRequest as exc:
        scopes = messages.list_scopes(db())
        response = _page(
            "inbox/index.html", scopes=scopes, error=exc.detail, typed=raw,
            domain=services().settings.test_inbox_domain,
        )
        response.status_code = 400
        return response
    return redirect(url_for("inbox.ui_scope", scope=scope))


def scope_page(scope: str) -> Response:
    """A scope's messages, newest first, re-sends of one job marked; filterable."""
    scope = _scope_or_404(scope)
    try:
        filters = params.filters(request.args.to_dict())
    except BadRequest:
        abort(400)
    page = messages.list_messages(db(), scope, filters=filters, bodies=False)
    resent: dict[int, int] = {}
    for group in messages.duplicate_groups(page.messages):
        for inbox_id in group[1:]:
            resent[inbox_id] = group[0]
    return _page(
        "inbox/scope.html", scope=scope, messages=list(reversed(page.messages)), more=page.more,
        resent=resent, filters=filters,
    )


def message_page(scope: str, message_id: int) -> Response:
    """One message: framed HTML, text, headers, raw source, the code and each link's state."""
    scope = _scope_or_404(scope)
    conn = db()
    found = messages.get_message(conn, scope, message_id)
    if found is None:
        abort(404)
    svc = services()
    links = [link_states.link_state(conn, svc, url) for url in found.links]
    return _page(
        "inbox/message.html", scope=scope, message=found, links=links,
        code=link_states.find_code(found.text_body),
        received=format_datetime(found.received_at),
    )


def message_html(scope: str, message_id: int) -> Response:
    """The email's HTML part, for the sandboxed frame only."""
    found = messages.get_message(db(), _scope_or_404(scope), message_id)
    if found is None or found.html_body is None:
        abort(404)
    response = Response(found.html_body, mimetype="text/html")
    response.headers["Content-Security-Policy"] = EMAIL_POLICY
    response.headers["X-Frame-Options"] = "SAMEORIGIN"
    response.headers["Cache-Control"] = "no-store"
    return response


def events() -> Response:
    """Server-sent events, one round: the recent scopes, then the browser reconnects.

    Behind the async front (`authsvc dev`) this URL is a stream that pushes on
    arrival; served by the Flask app alone it answers once and lets
    EventSource's retry poll, so it never holds a thread.
    """
    scopes = messages.list_scopes(db())
    data = json.dumps({"scopes": [s.as_json() for s in scopes]})
    body = f"retry: {EVENTS_RETRY_MS}\n\nevent: scopes\ndata: {data}\n\n"
    response = Response(body, mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-store"
    return response


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/", view_func=index)
    bp.add_url_rule("/ui/open", view_func=open_scope, endpoint="ui_open")
    bp.add_url_rule("/ui/scopes/<scope>", view_func=scope_page, endpoint="ui_scope")
    bp.add_url_rule(
        "/ui/scopes/<scope>/messages/<int:message_id>", view_func=message_page,
        endpoint="ui_message",
    )
    bp.add_url_rule(
        "/ui/scopes/<scope>/messages/<int:message_id>/html", view_func=message_html,
        endpoint="ui_message_html",
    )
    bp.add_url_rule("/events", view_func=events)
