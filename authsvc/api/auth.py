"""Bearer app keys and the per-app rate limit: who is calling, and may they."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from flask import g, request
from psycopg import Connection

from authsvc import ratelimit
from authsvc.api.problems import ApiProblem
from authsvc.app_keys import App, find_app_by_key
from authsvc.logs import log_event
from authsvc.services import Services

logger = logging.getLogger(__name__)
CHALLENGE = ("WWW-Authenticate", 'Bearer realm="authsvc"')


@dataclass(frozen=True)
class Caller:
    app: App
    api_key: str


def authenticate_caller(conn: Connection) -> Caller:
    """The app whose key is in `Authorization: Bearer …`; 401 unauthorized otherwise."""
    scheme, _, key = request.headers.get("Authorization", "").strip().partition(" ")
    key = key.strip()
    app = find_app_by_key(conn, key) if scheme.lower() == "bearer" and key else None
    if app is None:
        raise ApiProblem(
            401,
            "unauthorized",
            "Send the app's API key as 'Authorization: Bearer <key>'.",
            headers=(CHALLENGE,),
        )
    return Caller(app, key)


def enforce_app_rate_limit(conn: Connection, svc: Services, app: App) -> None:
    """Count this call against the app's budget; 429 rate_limited when it is spent."""
    # Every call of one app counts on one row: its commit must not queue them.
    decision = ratelimit.hit(conn, "app", str(app.id), svc.settings.rate_limit_app, svc.clock(),
                             wait_for_disk=False)
    if not decision.allowed:
        log_event(logger, "api_rate_limited", app_id=str(app.id), retry_after=decision.retry_after)
        raise ApiProblem(
            429,
            "rate_limited",
            f"This app sent more than {svc.settings.rate_limit_app} requests; retry later.",
            headers=(("Retry-After", str(max(decision.retry_after, 1))),),
        )


def current_caller() -> Caller:
    """The caller authenticated for this request (set before the view runs)."""
    caller: Caller = g.api_caller
    return caller
