"""The /api/v1 endpoints (SPEC §5): parse, run one use case, reply."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, g, jsonify, request
from psycopg import Connection

from authsvc.accounts import actions, deletion, email_change, sign_in
from authsvc.accounts.users import User
from authsvc.web.api.auth import admit_call, current_caller
from authsvc.web.api.calls import run_call
from authsvc.web.api.openapi import openapi_document
from authsvc.web.api.problems import API_PREFIX, install_problem_handlers, invalid_request
from authsvc.web.api.replies import Reply, json_reply
from authsvc.web.api.requests import (
    ACCOUNT_DELETION,
    ACCOUNT_DELETION_CONFIRM,
    EMAIL_CHANGE,
    EMAIL_CHANGE_CONFIRM,
    EMAIL_CHANGE_UNDO,
    LINK_REQUEST,
    PASSWORD_RESET_CONFIRM,
    SESSION,
    SIGN_IN_CONFIRM,
    SIGN_IN_REQUEST,
    SIGNUP,
    VERIFICATION_CONFIRM,
    BodySpec,
    allowed_redirect,
    parse_body,
    password_or_sign_in_code,
    read_idempotency_key,
    token_or_code,
)
from authsvc.web.plumbing import db, services

bp = Blueprint("api", __name__, url_prefix=API_PREFIX)
install_problem_handlers(bp)
PUBLIC_ENDPOINTS = {"api.openapi"}


@bp.before_request
def admit_caller() -> None:
    """Authenticate, count against the app's rate limit, read the Idempotency-Key."""
    if request.endpoint in PUBLIC_ENDPOINTS:
        return
    g.api_caller = admit_call(db(), services())
    if request.method == "POST":
        g.idempotency_key = read_idempotency_key()


@bp.get("/openapi.json")
def openapi() -> Response:
    """The OpenAPI 3 description of this API (no key needed)."""
    return jsonify(openapi_document(services().settings.base_url))


@bp.post("/signups")
def signups() -> Response:
    values, document = parse_body(SIGNUP)
    redirect_url = allowed_redirect(current_caller().app, values["redirect_url"])

    def sign_up(conn: Connection) -> Reply:
        actions.sign_up(
            conn,
            services(),
            email=str(values["email"]),
            password=str(values["password"]),
            redirect_url=redirect_url,
            app=current_caller().app,
        )
        return json_reply(202, {"status": "verification_sent"})

    return run_call(sign_up, document)


def _link_request(request_link: Callable[..., bool], spec: BodySpec = LINK_REQUEST) -> Response:
    """A verification, reset or sign-in request: 202 accepted whatever the account (SPEC §5)."""
    values, document = parse_body(spec)
    redirect_url = allowed_redirect(current_caller().app, values["redirect_url"])

    def call(conn: Connection) -> Reply:
        request_link(
            conn, services(), email=str(values["email"]), redirect_url=redirect_url,
            app=current_caller().app,
        )
        return json_reply(202, {"status": "accepted"})

    return run_call(call, document)


@bp.post("/verifications")
def verifications() -> Response:
    return _link_request(actions.request_verification)


def _redeem(
    values: dict[str, str | None], by_token: Callable[..., User], by_code: Callable[..., User]
) -> Callable[[Connection], User]:
    """The confirm body's use case: the emailed link's token, or the emailed code."""
    code = token_or_code(values)  # 400 before any transaction when it is neither form
    if code is None:
        return lambda conn: by_token(
            conn, services(), token=values["token"], password=values["password"]
        )
    return lambda conn: by_code(
        conn, services(), email=code.email, code=code.code, password=values["password"]
    )


@bp.post("/verifications/confirm")
def verifications_confirm() -> Response:
    values, document = parse_body(VERIFICATION_CONFIRM)
    redeem = _redeem(values, actions.confirm_verification, actions.confirm_verification_code)

    def confirm_verification(conn: Connection) -> Reply:
        user = redeem(conn)
        return json_reply(200, {"email": user.email, "verified": True})

    return run_call(confirm_verification, document)


@bp.post("/password-resets")
def password_resets() -> Response:
    return _link_request(actions.request_password_reset)


@bp.post("/password-resets/confirm")
def password_resets_confirm() -> Response:
    values, document = parse_body(PASSWORD_RESET_CONFIRM)
    redeem = _redeem(values, actions.reset_password, actions.reset_password_with_code)

    def reset_password(conn: Connection) -> Reply:
        redeem(conn)
        return json_reply(200, {"status": "password_changed"})

    return run_call(reset_password, document)


@bp.post("/sessions")
def sessions() -> Response:
    values, document = parse_body(SESSION)

    def authenticate(conn: Connection) -> Reply:
        user = actions.authenticate(
            conn, services(), email=str(values["email"]), password=str(values["password"])
        )
        # Only a proven address gets here (actions.authenticate).
        summary = {"id": user.id, "email": user.email, "email_verified": True}
        return json_reply(200, {"user": summary})

    # Never replayed: a stored 200 would still let the old password in after a
    # reset. Checking credentials has no effect to repeat, so a retry is safe.
    return run_call(authenticate, document, replayable=False)


# --- an address over its life (SPEC §12) -------------------------------------------


@bp.post("/email-changes")
def email_changes() -> Response:
    values, document = parse_body(EMAIL_CHANGE)
    email, new_email = str(values["email"]), str(values["new_email"])
    if new_email == email:  # refused before it runs, like any malformed body
        raise invalid_request("/new_email", "is the account's own address")
    password, sign_in_code = password_or_sign_in_code(values)
    redirect_url = allowed_redirect(current_caller().app, values["redirect_url"])

    def request_email_change(conn: Connection) -> Reply:
        email_change.request_email_change(
            conn, services(), email=email, password=password, sign_in_code=sign_in_code,
            new_email=new_email, redirect_url=redirect_url, app=current_caller().app,
        )
        # The same answer whether or not the new address is taken (SPEC §12).
        return json_reply(202, {"status": "confirmation_sent"})

    return run_call(request_email_change, document)


@bp.post("/email-changes/confirm")
def email_changes_confirm() -> Response:
    values, document = parse_body(EMAIL_CHANGE_CONFIRM)
    code = token_or_code(values)
    app = current_caller().app

    def confirm_email_change(conn: Connection) -> Reply:
        if code is None:
            changed = email_change.confirm_email_change(
                conn, services(), token=values["token"], app=app)
        else:
            changed = email_change.confirm_email_change_code(
                conn, services(), email=code.email, code=code.code, app=app)
        body = {"email": changed.user.email, "previous_email": changed.previous_email}
        return json_reply(200, body)

    return run_call(confirm_email_change, document)


@bp.post("/email-changes/undo")
def email_changes_undo() -> Response:
    values, document = parse_body(EMAIL_CHANGE_UNDO)

    def undo_email_change(conn: Connection) -> Reply:
        restored = email_change.undo_email_change(
            conn, services(), token=values["token"], password=values["password"],
            app=current_caller().app,
        )
        return json_reply(200, {"email": restored.email})

    return run_call(undo_email_change, document)


@bp.post("/account-deletions")
def account_deletions() -> Response:
    values, document = parse_body(ACCOUNT_DELETION)
    password, sign_in_code = password_or_sign_in_code(values)

    def request_account_deletion(conn: Connection) -> Reply:
        deletion.request_account_deletion(
            conn, services(), email=str(values["email"]), password=password,
            sign_in_code=sign_in_code, app=current_caller().app,
        )
        return json_reply(202, {"status": "confirmation_sent"})

    return run_call(request_account_deletion, document)


@bp.post("/account-deletions/confirm")
def account_deletions_confirm() -> Response:
    values, document = parse_body(ACCOUNT_DELETION_CONFIRM)
    code = token_or_code(values)

    def confirm_account_deletion(conn: Connection) -> Reply:
        if code is None:
            deletion.confirm_account_deletion(conn, services(), token=values["token"])
        else:
            deletion.confirm_account_deletion_code(
                conn, services(), email=code.email, code=code.code)
        return json_reply(200, {"deleted": True})

    return run_call(confirm_account_deletion, document)


# --- sign in by email (SPEC §13) ---------------------------------------------------


@bp.post("/sign-in-links")
def sign_in_links() -> Response:
    # `locale` is accepted and checked; emails are in English for now (SPEC §14).
    return _link_request(actions.request_sign_in, SIGN_IN_REQUEST)


@bp.post("/sign-in-links/confirm")
def sign_in_links_confirm() -> Response:
    values, document = parse_body(SIGN_IN_CONFIRM)
    code = token_or_code(values)

    def confirm_sign_in(conn: Connection) -> Reply:
        if code is None:
            signed_in = sign_in.sign_in_with_link(conn, services(), token=values["token"])
        else:
            signed_in = sign_in.sign_in_with_code(
                conn, services(), email=code.email, code=code.code)
        user = signed_in.user
        summary = {"id": user.id, "email": user.email, "email_verified": True}
        return json_reply(200, {"user": summary, "created": signed_in.created})

    return run_call(confirm_sign_in, document)
