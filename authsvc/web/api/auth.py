"""Bearer app keys and the per-key rate limit: who is calling, and may they."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import g, request
from psycopg import Connection

from authsvc.apps.keys import App, find_app_counting_call
from authsvc.observability.logs import log_event
from authsvc.services import Services
from authsvc.web.api.problems import ApiProblem, problem_reply

logger = logging.getLogger(__name__)
CHALLENGE = ("WWW-Authenticate", 'Bearer realm="authsvc"')


@dataclass(frozen=True)
class Caller:
    app: App
    api_key: str


def admit_call(conn: Connection, svc: Services) -> Caller:
    """The app whose key is in `Authorization: Bearer …`, this call counted against its budget.

    401 unauthorized without a live key (nothing is counted), 429
    rate_limited when the key's budget is spent. One round trip: the key
    lookup counts the call (app_keys.find_app_counting_call).
    """
    scheme, _, key = request.headers.get("Authorization", "").strip().partition(" ")
    key = key.strip()
    limit = svc.settings.rate_limit_app
    found = (find_app_counting_call(conn, key, limit, svc.clock())
             if scheme.lower() == "bearer" and key else None)
    if found is None:
        raise ApiProblem(problem_reply(
            401,
            "unauthorized",
            "Send the app's API key as 'Authorization: Bearer <key>'.",
            headers=(CHALLENGE,),
        ))
    app, decision = found
    if not decision.allowed:
        log_event(logger, "api_rate_limited", app_id=str(app.id), retry_after=decision.retry_after)
        raise ApiProblem(problem_reply(
            429,
            "rate_limited",
            f"This app sent more than {limit} requests; retry later.",
            headers=(("Retry-After", str(max(decision.retry_after, 1))),),
        ))
    return Caller(app, key)


def current_caller() -> Caller:
    """The caller authenticated for this request (set before the view runs)."""
    caller: Caller = g.api_caller
    return caller
