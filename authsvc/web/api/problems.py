"""RFC 9457 problem details with a stable `code`, for every error under /api/v1."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from flask import Blueprint, Response, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from authsvc.problem_documents import problem_document
from authsvc.problem_documents import problem_type as problem_type
from authsvc.web.api.replies import Reply, encode_json
from authsvc.web.plumbing import database_failed

logger = logging.getLogger(__name__)
API_PREFIX = "/api/v1"
DATABASE_RETRY_AFTER = "2"

TITLES = {
    "invalid_request": "The request is malformed",
    "redirect_not_allowed": "The redirect URL is not on this app's allowlist",
    "unauthorized": "A valid app key is required",
    "rate_limited": "Too many requests",
    "weak_password": "The password does not meet the policy",
    "invalid_token": "The link is not valid",
    "token_expired": "The link has expired",
    "token_superseded": "A newer link was issued",
    "token_used": "The link was already used",
    "invalid_code": "The code is not valid",
    "code_exhausted": "Too many wrong codes; this email's code no longer works",
    "invalid_credentials": "Email or password is wrong",
    "password_required": "Choose a password to confirm this address",
    "email_taken": "A confirmed account uses this address",
    "idempotency_key_reused": "The Idempotency-Key was used with a different request",
    "idempotency_in_progress": "A request with this Idempotency-Key is still running",
    "not_found": "No such endpoint",
    "template_invalid": "The template is refused",
    "template_not_found": "The app has no template for this kind and locale",
    "method_not_allowed": "Method not allowed on this endpoint",
    "payload_too_large": "The request body is too large",
    "unsupported_media_type": "The body must be JSON",
    "internal_error": "Internal error",
    "service_unavailable": "The service is briefly unavailable",
}
# Werkzeug errors that can surface inside the API, by status.
HTTP_CODES = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def problem_reply(
    status: int,
    code: str,
    detail: str,
    *,
    errors: list[dict[str, str]] | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> Reply:
    """A problem+json reply; `errors` lists field problems as {pointer, detail}."""
    title = TITLES.get(code, code.replace("_", " ").capitalize())
    extra: dict[str, Any] = {"errors": errors} if errors else {}
    document = problem_document(status, code, title, detail, **extra)
    return Reply(status, encode_json(document), headers)


class ApiProblem(Exception):
    """Raised anywhere in an API request to answer with its problem reply (problem_reply)."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(f"{reply.status} {reply.body.decode(errors='replace')}")
        self.reply = reply


def invalid_request(pointer: str, detail: str) -> ApiProblem:
    """400 invalid_request for one field (`pointer` is a JSON pointer such as /email)."""
    return ApiProblem(problem_reply(
        400,
        "invalid_request",
        f"{pointer.lstrip('/') or 'body'}: {detail}",
        errors=[{"pointer": "#" + pointer, "detail": detail}],
    ))


def http_problem_response(exc: HTTPException) -> Response:
    """A Werkzeug error (404, 405, 413, …) as a problem+json response."""
    status = exc.code or 500
    code = HTTP_CODES.get(status) or (exc.name or "error").lower().replace(" ", "_")
    headers: tuple[tuple[str, str], ...] = ()
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        headers = (("Allow", ", ".join(sorted(exc.valid_methods))),)
    detail = exc.description or exc.name or "error"
    return problem_reply(status, code, detail, headers=headers).to_response()


def _on_api_problem(exc: ApiProblem) -> Response:
    return exc.reply.to_response()


def _on_unexpected(exc: Exception) -> Response:
    # The request's transaction has rolled back: nothing happened, nothing was
    # stored under its Idempotency-Key, and a retry runs afresh.
    logger.error("api_internal_error", exc_info=exc, extra={"path": request.path})
    reply = problem_reply(500, "internal_error", "Something went wrong; retrying is safe.")
    return reply.to_response()


def _on_database_unavailable(exc: psycopg.OperationalError) -> Response:
    # Lost or unreachable database (a restart, a failover, an exhausted pool):
    # nothing committed, so tell the app to retry rather than report a bug.
    logger.warning(
        "api_database_unavailable", extra={"path": request.path, "error": type(exc).__name__}
    )
    database_failed()
    detail = "The database is unavailable; retry shortly (retrying is safe)."
    reply = problem_reply(
        503, "service_unavailable", detail, headers=(("Retry-After", DATABASE_RETRY_AFTER),)
    )
    return reply.to_response()


def _routing_problem() -> Response | None:
    """404/405 inside /api/v1 as problems: routing fails before any blueprint is chosen."""
    exc = request.routing_exception
    inside = request.path == API_PREFIX or request.path.startswith(API_PREFIX + "/")
    if not inside or not isinstance(exc, HTTPException) or (exc.code or 0) < 400:
        return None
    return http_problem_response(exc)


def install_problem_handlers(bp: Blueprint) -> None:
    """Answer every error raised in the blueprint (and unrouted /api/v1 paths) as a problem."""
    bp.register_error_handler(ApiProblem, _on_api_problem)
    bp.register_error_handler(HTTPException, http_problem_response)
    bp.register_error_handler(psycopg.OperationalError, _on_database_unavailable)
    bp.register_error_handler(Exception, _on_unexpected)
    bp.before_app_request(_routing_problem)
