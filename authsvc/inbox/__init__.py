"""The scoped test inbox: SMTP sink, /_inbox HTTP API and its pages (never in production)."""

from __future__ import annotations

from flask import Blueprint

from authsvc.inbox import ui, views

bp = Blueprint(
    "inbox", __name__, url_prefix="/_inbox", static_folder="static", static_url_path="/static"
)
views.register(bp)
ui.register(bp)
