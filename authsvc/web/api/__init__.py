"""The JSON API for embedding apps (/api/v1)."""

from __future__ import annotations

from authsvc.web.api.views import bp

__all__ = ["bp"]
