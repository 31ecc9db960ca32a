"""The site's icon: one small SVG for the pages and the test inbox alike."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, send_from_directory

STATIC = Path(__file__).resolve().parent / "static"
# It changes about never, and every page links it: let browsers keep it a month.
ICON_MAX_AGE = 30 * 86400
CACHEABLE_ENDPOINTS = frozenset({"pages.favicon", "pages.favicon_ico"})


def favicon() -> Response:
    return send_from_directory(STATIC, "favicon.svg", mimetype="image/svg+xml",
                               max_age=ICON_MAX_AGE)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/favicon.svg", view_func=favicon, methods=["GET"])
    # Where browsers look when a response (a JSON answer, a download) links no icon.
    bp.add_url_rule("/favicon.ico", endpoint="favicon_ico", view_func=favicon, methods=["GET"])
