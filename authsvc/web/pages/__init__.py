"""Server-rendered web pages (SPEC §6): plain HTML forms, no JavaScript anywhere."""

from __future__ import annotations

from flask import Blueprint

from authsvc.web.pages import (
    account,
    check_email,
    codes,
    deletion,
    email_change,
    icon,
    rendering,
    resend,
    reset,
    sign_in,
    signup,
    verify,
)

bp = Blueprint("pages", __name__, static_folder="static", static_url_path="/static/pages")
rendering.install(bp)
for module in (signup, verify, reset, resend, check_email, account, codes, email_change,
               deletion, sign_in, icon):
    module.register(bp)
