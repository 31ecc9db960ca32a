"""Server-rendered web pages."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("pages", __name__)
