"""The /_inbox HTTP API (SPEC §8): scopes, long-polled listings and expect-one."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from authsvc.db import resolve_listen_url
from authsvc.inbox import messages, params
from authsvc.inbox.access import CHALLENGE, UNAUTHORIZED_DETAIL, token_accepted
from authsvc.inbox.answers import expect_one_answer, settle_left
from authsvc.inbox.messages import Page, Seen
from authsvc.inbox.openapi import openapi_document
from authsvc.inbox.params import BadRequest, Filters
from authsvc.inbox.scopes import new_scope_name
from authsvc.inbox.thread_waiters import ScopeWatcher, TooManyWaiters
from authsvc.problem_documents import problem_document
from authsvc.web import services

EXTENSION_KEY = "authsvc_inbox"
PREFIX = "/_inbox"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def problem(status: int, code: str, title: str, detail: str, **extra: Any) -> Response:
    """An RFC 9457 problem document."""
    response = jsonify(problem_document(status, code, title, detail, **extra))
    response.status_code = status
    response.content_type = "application/problem+json"
    return response


def _args() -> dict[str, str]:
    return request.args.to_dict()


def _watcher() -> ScopeWatcher:
    watcher: ScopeWatcher = current_app.extensions[EXTENSION_KEY]
    return watcher


def _scan(scope: str, since: int, filters: Filters) -> list[Seen]:
    # A connection per check, never held across the wait: a hundred long
    # polls must not drain the pool the rest of the app needs.
    with services().pool.connection() as conn:
        return messages.scan_scope(conn, scope, since=since, filters=filters)


def _page(scope: str, since: int, filters: Filters, limit: int, bodies: bool) -> Page:
    with services().pool.connection() as conn:
        return messages.list_messages(
            conn, scope, since=since, filters=filters, limit=limit, bodies=bodies
        )


def _require_token() -> Response | None:
    expected = services().settings.test_inbox_token
    if token_accepted(expected, request.headers.get("Authorization", "")):
        return None
    response = problem(401, "unauthorized", "Unauthorized", UNAUTHORIZED_DETAIL)
    response.headers["WWW-Authenticate"] = CHALLENGE
    return response


def _bad_request(exc: BadRequest) -> Response:
    return problem(400, "invalid_request", "Bad request", exc.detail)


def _too_many_waiters(exc: TooManyWaiters) -> Response:
    # Not a 408: nothing was looked for yet. The client retries after a second.
    detail = f"{exc}; retry shortly (this process caps concurrent long polls)"
    response = problem(503, "too_many_waiters", "Too many waiting requests", detail)
    response.headers["Retry-After"] = "1"
    return response


def _http_problem(exc: HTTPException) -> Response:
    status = exc.code or 500
    code = _HTTP_CODES.get(status) or (exc.name or "error").lower().replace(" ", "_")
    response = problem(status, code, exc.name or "Error", exc.description or exc.name or "error")
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        response.headers["Allow"] = ", ".join(sorted(exc.valid_methods))
    return response


def _routing_problem() -> Response | None:
    """404/405 under /_inbox as problems: routing fails before any blueprint is chosen."""
    exc = request.routing_exception
    inside = request.path == PREFIX or request.path.startswith(PREFIX + "/")
    if not inside or not isinstance(exc, HTTPException) or (exc.code or 0) < 400:
        return None
    return _require_token() or _http_problem(exc)


def _no_store(response: Response) -> Response:
    # Messages carry links with live tokens, scope names are capabilities:
    # no browser or proxy cache may keep an answer.
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def create_scope() -> tuple[Response, int]:
    """A fresh, unguessable scope and the address that delivers into it."""
    scope = new_scope_name()
    address = f"{scope}@{services().settings.test_inbox_domain}"
    return jsonify(scope=scope, address=address), 201


def list_scope_messages(scope: str) -> Response:
    """Messages of a scope, oldest first, waiting up to `wait` seconds for `min` of them."""
    query = params.list_query(scope, _args())
    _watcher().wait_until(
        query.scope,
        lambda: _scan(query.scope, query.since, query.filters),
        lambda seen: len(seen) >= query.minimum,
        query.wait,
    )
    page = _page(query.scope, query.since, query.filters, query.limit, query.bodies)
    return jsonify(page.as_json(query.since))


def expect_one(scope: str) -> Response:
    """200 for exactly one message, 409 for more (with duplicate groups), 408 for none."""
    query = params.expect_query(scope, _args())
    watcher = _watcher()

    def scan() -> list[Seen]:
        return _scan(query.scope, query.since, query.filters)

    seen = watcher.wait_until(query.scope, scan, lambda found: len(found) >= 1, query.timeout)
    remaining = settle_left(query, seen)
    if remaining > 0:
        seen = watcher.wait_until(query.scope, scan, lambda found: len(found) >= 2, remaining)
    page = _page(query.scope, query.since, query.filters, params.MAX_LISTED, True)
    status, body = expect_one_answer(query, seen, page)
    response = jsonify(body)
    response.status_code = status
    if status == 408:
        response.content_type = "application/problem+json"
    return response


def list_recent_scopes() -> Response:
    """The most recently written scopes, newest first."""
    limit = params.integer(_args(), "limit", 50, 500, minimum=1)
    with services().pool.connection() as conn:
        found = messages.list_scopes(conn, limit)
    return jsonify(scopes=[s.as_json() for s in found])


def get_message(scope: str, message_id: int) -> Response:
    with services().pool.connection() as conn:
        found = messages.get_message(conn, params.scope(scope), message_id)
    if found is None:
        return problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
    return jsonify(message=found.as_json())


def get_raw_message(scope: str, message_id: int) -> Response:
    with services().pool.connection() as conn:
        raw = messages.get_raw_message(conn, params.scope(scope), message_id)
    if raw is None:
        return problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
    return Response(raw, mimetype="message/rfc822")


def delete_scope(scope: str) -> tuple[str, int]:
    with services().pool.connection() as conn:
        messages.delete_scope(conn, params.scope(scope))
    return "", 204


def openapi() -> Response:
    """The OpenAPI document of /_inbox."""
    return jsonify(openapi_document())


def _start_watcher(state: BlueprintSetupState) -> None:
    app = state.app
    # LISTEN only on the direct URL (SPEC §11); without one the watcher polls.
    settings = app.extensions["authsvc"].settings
    app.extensions[EXTENSION_KEY] = ScopeWatcher(resolve_listen_url(settings))


def register(bp: Blueprint) -> None:
    """Attach the routes, the bearer-token check and the per-app watcher to `bp`."""
    bp.record_once(_start_watcher)
    bp.before_request(_require_token)
    bp.after_request(_no_store)
    bp.register_error_handler(BadRequest, _bad_request)
    bp.register_error_handler(TooManyWaiters, _too_many_waiters)
    bp.register_error_handler(HTTPException, _http_problem)
    bp.before_app_request(_routing_problem)
    bp.add_url_rule("/scopes", view_func=create_scope, methods=["POST"])
    bp.add_url_rule("/scopes", view_func=list_recent_scopes, methods=["GET"])
    bp.add_url_rule("/scopes/<scope>/messages", view_func=list_scope_messages)
    bp.add_url_rule("/scopes/<scope>/expect-one", view_func=expect_one)
    bp.add_url_rule("/scopes/<scope>/messages/<int:message_id>", view_func=get_message)
    bp.add_url_rule("/scopes/<scope>/messages/<int:message_id>/raw", view_func=get_raw_message)
    bp.add_url_rule("/scopes/<scope>", view_func=delete_scope, methods=["DELETE"])
    bp.add_url_rule("/openapi.json", view_func=openapi)
