"""The scoped test inbox: SMTP sink and /_inbox HTTP API (never in production)."""

from __future__ import annotations

from flask import Blueprint

from authsvc.inbox import views

bp = Blueprint("inbox", __name__, url_prefix="/_inbox")
views.register(bp)
