"""Running one API call: domain errors to problems, Idempotency-Key handling.

With a key, the lock, the lookup, the use case and the stored outcome share
one transaction (the use case's own transaction nests as a savepoint), so a
crash or error stores nothing and a retry simply runs again.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable

from flask import Response, g, request
from psycopg import Connection

from authsvc import idempotency
from authsvc.accounts import InvalidCredentials, PasswordRequired, TooManyAttempts
from authsvc.api.auth import current_caller
from authsvc.api.problems import problem_reply
from authsvc.api.replies import Reply
from authsvc.logs import log_event
from authsvc.passwords import WeakPassword
from authsvc.tokens import TokenError
from authsvc.web import db, services

logger = logging.getLogger(__name__)
UseCase = Callable[[Connection], Reply]
_TOKEN_DETAILS = {
    "invalid_token": "The token is malformed, tampered with, or for another purpose.",
    "token_expired": "The link expired; request a new one.",
    "token_superseded": "A newer link was sent; use the most recent email.",
    "token_used": "This link was already used.",
    "invalid_code": "The code is wrong, was replaced by a newer email, was already used,"
    " or this address has none; check the newest email.",
    "code_exhausted": "Too many wrong codes for this email; use its link, or request a new"
    " email.",
}
_BAD_INPUT_CODES = {"invalid_token", "invalid_code"}


def _outcome(use_case: UseCase, conn: Connection) -> Reply:
    """Run the use case; the domain's expected failures become problem replies."""
    try:
        return use_case(conn)
    except WeakPassword as exc:
        return problem_reply(422, "weak_password", str(exc))
    except TokenError as exc:
        status = 400 if exc.code in _BAD_INPUT_CODES else 410
        return problem_reply(status, exc.code, _TOKEN_DETAILS.get(exc.code, exc.code))
    except PasswordRequired:
        detail = (
            "More than one signup (or a resend) used this address before it was confirmed:"
            " send `password` with the token or code to choose the account's password."
        )
        return problem_reply(422, "password_required", detail)
    except InvalidCredentials:
        return problem_reply(401, "invalid_credentials", "The email or password is wrong.")
    except TooManyAttempts as exc:
        retry_after = str(max(exc.retry_after, 1))
        detail = "Too many failed sign-ins for this address; retry later."
        return problem_reply(429, "rate_limited", detail, headers=(("Retry-After", retry_after),))


def is_replayable(status: int) -> bool:
    """Outcomes stored under an Idempotency-Key: not 429 (time-bound) nor 5xx (never stored)."""
    return status < 500 and status != 429


def run_call(use_case: UseCase, document: object, *, replayable: bool = True) -> Response:
    """Answer the request with the use case's outcome, once per Idempotency-Key.

    `replayable=False` is for calls whose answer must reflect the present
    (a credential check): the key is validated but nothing is stored or replayed.
    """
    conn = db()
    key: str | None = g.get("idempotency_key")
    if key is None or not replayable:
        return _outcome(use_case, conn).to_response()

    caller = current_caller()
    app_id = caller.app.id
    fingerprint = idempotency.fingerprint(caller.api_key, request.method, request.path, document)
    with conn.transaction():
        if not idempotency.try_lock_key(conn, app_id, key):
            log_event(logger, "idempotency_in_progress", app_id=str(app_id), path=request.path)
            detail = "A request with this Idempotency-Key is still running; retry shortly."
            return problem_reply(
                409, "idempotency_in_progress", detail, headers=(("Retry-After", "1"),)
            ).to_response()
        now = services().clock()
        stored = idempotency.find_idempotency_record(conn, app_id, key, now)
        if stored is not None:
            if not hmac.compare_digest(stored.fingerprint, fingerprint):
                detail = (
                    "This Idempotency-Key was first used with a different request; use a new key."
                )
                return problem_reply(422, "idempotency_key_reused", detail).to_response()
            log_event(logger, "idempotency_replayed", app_id=str(app_id), path=request.path)
            return Reply(stored.status_code, stored.response_body).to_response(replayed=True)
        reply = _outcome(use_case, conn)
        if is_replayable(reply.status):
            idempotency.save_idempotency_record(
                conn,
                app_id,
                key,
                fingerprint=fingerprint,
                status_code=reply.status,
                response_body=reply.body,
                now=now,
            )
    return reply.to_response()
