"""The /_inbox HTTP API (SPEC §8): scopes, long-polled listings and expect-one."""

from __future__ import annotations

import hmac
import re
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from authsvc.inbox import messages
from authsvc.inbox.messages import InboxMessage
from authsvc.inbox.scopes import BadScope, new_scope_name, normalise_scope
from authsvc.inbox.waiting import ScopeWatcher, TooManyWaiters
from authsvc.web import services

MAX_WAIT_SECONDS = 30.0
MAX_SETTLE_SECONDS = 10.0
DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_SETTLE_SECONDS = 1.0
MAX_ID = 2**63 - 1
_DECIMAL = re.compile(r"\d{1,6}(\.\d{1,6})?")
_INTEGER = re.compile(r"\d{1,19}")
EXTENSION_KEY = "authsvc_inbox"
PREFIX = "/_inbox"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class BadRequest(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def problem(status: int, code: str, title: str, detail: str, **extra: Any) -> Response:
    """An RFC 9457 problem document."""
    body = {"type": "about:blank", "title": title, "status": status, "code": code, "detail": detail}
    response = jsonify({**body, **extra})
    response.status_code = status
    response.content_type = "application/problem+json"
    return response


def _seconds(name: str, default: float, maximum: float) -> float:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not _DECIMAL.fullmatch(raw) or float(raw) > maximum:
        raise BadRequest(f"{name} must be a number of seconds from 0 to {maximum:g}, got {raw!r}")
    return float(raw)


def _integer(name: str, default: int, maximum: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw) or int(raw) > maximum:
        raise BadRequest(f"{name} must be a whole number from 0 to {maximum}, got {raw!r}")
    return int(raw)


def _scope(raw: str) -> str:
    try:
        return normalise_scope(raw)
    except BadScope as exc:
        raise BadRequest(str(exc)) from None


def _watcher() -> ScopeWatcher:
    watcher: ScopeWatcher = current_app.extensions[EXTENSION_KEY]
    return watcher


def _list(scope: str, since: int) -> list[InboxMessage]:
    # A connection per check, never held across the wait: a hundred long
    # polls must not drain the pool the rest of the app needs.
    with services().pool.connection() as conn:
        return messages.list_messages(conn, scope, since=since)


def _require_token() -> Response | None:
    expected = services().settings.test_inbox_token
    if not expected:
        return None
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode(), expected.encode()
    ):
        return None
    response = problem(401, "unauthorized", "Unauthorized", "send Authorization: Bearer <token>")
    response.headers["WWW-Authenticate"] = 'Bearer realm="authsvc test inbox"'
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


def create_scope() -> tuple[Response, int]:
    """A fresh, unguessable scope and the address that delivers into it."""
    scope = new_scope_name()
    address = f"{scope}@{services().settings.test_inbox_domain}"
    return jsonify(scope=scope, address=address), 201


def list_scope_messages(scope: str) -> Response:
    """Messages of a scope, oldest first, waiting up to `wait` seconds for `min` of them."""
    scope = _scope(scope)
    wait = _seconds("wait", 0.0, MAX_WAIT_SECONDS)
    minimum = _integer("min", 1, messages.MAX_LISTED)
    since = _integer("since", 0, MAX_ID)
    found = _watcher().wait_until(
        scope, lambda: _list(scope, since), lambda ms: len(ms) >= minimum, wait
    )
    return jsonify(messages=[m.as_json() for m in found])


def expect_one(scope: str) -> Response:
    """200 for exactly one message, 409 for more (with duplicate groups), 408 for none."""
    scope = _scope(scope)
    timeout = _seconds("timeout", DEFAULT_TIMEOUT_SECONDS, MAX_WAIT_SECONDS)
    settle = _seconds("settle", DEFAULT_SETTLE_SECONDS, MAX_SETTLE_SECONDS)
    since = _integer("since", 0, MAX_ID)
    watcher = _watcher()
    found = watcher.wait_until(scope, lambda: _list(scope, since), lambda ms: len(ms) >= 1, timeout)
    if len(found) == 1:
        # Settle counts from the message's arrival, so a late check needs no extra wait.
        remaining = settle - found[0].age_seconds
        if remaining > 0:
            found = watcher.wait_until(
                scope, lambda: _list(scope, since), lambda ms: len(ms) >= 2, remaining
            )
    if not found:
        detail = f"no message arrived in {scope!r} within {timeout:g} s"
        return problem(408, "no_message", "No message", detail, count=0, messages=[], duplicates=[])
    if len(found) == 1:
        return jsonify(message=found[0].as_json())
    response = jsonify(
        count=len(found),
        messages=[m.as_json() for m in found],
        duplicates=messages.duplicate_groups(found),
    )
    response.status_code = 409
    return response


def get_message(scope: str, message_id: int) -> Response:
    with services().pool.connection() as conn:
        found = messages.get_message(conn, _scope(scope), message_id)
    if found is None:
        return problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
    return jsonify(message=found.as_json())


def get_raw_message(scope: str, message_id: int) -> Response:
    with services().pool.connection() as conn:
        raw = messages.get_raw_message(conn, _scope(scope), message_id)
    if raw is None:
        return problem(404, "not_found", "Not found", f"no message {message_id} in this scope")
    return Response(raw, mimetype="message/rfc822")


def delete_scope(scope: str) -> tuple[str, int]:
    with services().pool.connection() as conn:
        messages.delete_scope(conn, _scope(scope))
    return "", 204


def _start_watcher(state: BlueprintSetupState) -> None:
    app = state.app
    conninfo = app.extensions["authsvc"].pool.conninfo
    app.extensions[EXTENSION_KEY] = ScopeWatcher(conninfo)


def register(bp: Blueprint) -> None:
    """Attach the routes, the bearer-token check and the per-app watcher to `bp`."""
    bp.record_once(_start_watcher)
    bp.before_request(_require_token)
    bp.register_error_handler(BadRequest, _bad_request)
    bp.register_error_handler(TooManyWaiters, _too_many_waiters)
    bp.register_error_handler(HTTPException, _http_problem)
    bp.before_app_request(_routing_problem)
    bp.add_url_rule("/scopes", view_func=create_scope, methods=["POST"])
    bp.add_url_rule("/scopes/<scope>/messages", view_func=list_scope_messages)
    bp.add_url_rule("/scopes/<scope>/expect-one", view_func=expect_one)
    bp.add_url_rule("/scopes/<scope>/messages/<int:message_id>", view_func=get_message)
    bp.add_url_rule("/scopes/<scope>/messages/<int:message_id>/raw", view_func=get_raw_message)
    bp.add_url_rule("/scopes/<scope>", view_func=delete_scope, methods=["DELETE"])
