"""Running one API call under the Idempotency-Key protocol.

With a key, the lock, the lookup, the use case and the stored outcome share
one transaction (the use case's own transaction nests as a savepoint), so a
crash or error stores nothing and a retry simply runs again.
"""

from __future__ import annotations

import hmac
import logging

from flask import Response, g, request

from authsvc.apps import idempotency
from authsvc.observability.logs import log_event
from authsvc.web.api.auth import current_caller
from authsvc.web.api.domain_errors import UseCase, outcome
from authsvc.web.api.problems import problem_reply
from authsvc.web.api.replies import Reply
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


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
        return outcome(use_case, conn).to_response()

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
        reply = outcome(use_case, conn)
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
