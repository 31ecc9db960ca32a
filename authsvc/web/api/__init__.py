"""The JSON API for embedding apps (/api/v1)."""

from __future__ import annotations

# app_settings adds the calling app's own routes (brand, templates) to the blueprint.
from authsvc.web.api import app_settings as _app_settings  # noqa: F401
from authsvc.web.api.views import bp

__all__ = ["bp"]
