"""Liveness and readiness probes for orchestrators."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from authsvc.migrate import pending_migrations
from authsvc.web import db

bp = Blueprint("service", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """The process is up; says nothing about its dependencies."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Ready when the database answers and every migration is applied."""
    try:
        pending = pending_migrations(db())
    except Exception as exc:  # any database failure means "not ready", not a 500
        return jsonify(status="unavailable", error=type(exc).__name__), 503
    if pending:
        return jsonify(status="migrations_pending", pending=[m.version for m in pending]), 503
    return jsonify(status="ready"), 200
