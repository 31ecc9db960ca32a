"""The operator console at /admin (SPEC §15): server-rendered, no JavaScript."""

from __future__ import annotations

from flask import Blueprint

from authsvc.web.console import accounts, guard, jobs, listings, overview, sign_in

bp = Blueprint("console", __name__, url_prefix="/admin", static_folder="static",
               static_url_path="/static")
guard.install(bp)
for module in (sign_in, overview, jobs, accounts, listings):
    module.register(bp)
