"""Liveness and readiness probes for orchestrators."""

from __future__ import annotations

import psycopg
from flask import Blueprint, Response, jsonify

from authsvc.db.migrate import pending_migrations
from authsvc.web.plumbing import database_failed, services

bp = Blueprint("service", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """The process is up; says nothing about its dependencies."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Ready when the database answers and every migration is applied."""
    try:
        # Its own short checkout: a probe must answer quickly, not queue for
        # the pool's full timeout while the database is down.
        with services().pool.connection(timeout=2.0) as conn:
            pending = pending_migrations(conn)
    except Exception as exc:  # any database failure means "not ready", not a 500
        if isinstance(exc, psycopg.OperationalError):
            database_failed()  # so the next probe does not find the next dead connection
        return jsonify(status="unavailable", error=type(exc).__name__), 503
    if pending:
        return jsonify(status="migrations_pending", pending=[m.version for m in pending]), 503
    return jsonify(status="ready"), 200
