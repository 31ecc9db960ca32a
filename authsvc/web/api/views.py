"""The /api/v1 endpoints (SPEC §5): parse, run one use case, reply."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from flask import Blueprint, Response, g, jsonify, request
from psycopg import Connection

from authsvc.accounts import actions, deletion, email_change, sign_in
from authsvc.web.api.auth import admit_call, current_caller
from authsvc.web.api.calls import run_call
from authsvc.web.api.domain_errors import UseCase
from authsvc.web.api.openapi import OPERATIONS, Operation, openapi_document
from authsvc.web.api.problems import API_PREFIX, install_problem_handlers, invalid_request
from authsvc.web.api.replies import Reply, json_reply
from authsvc.web.api.requests import (
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
T = TypeVar("T")


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


def _operation() -> Operation:
    """The documented operation (OPERATIONS) of this request's endpoint."""
    rule = request.url_rule
    assert rule is not None
    return OPERATIONS[rule.rule.removeprefix(API_PREFIX)]


def _checked_body() -> tuple[dict[str, str | None], dict[str, Any]]:
    """The request's body, checked against the spec its documented operation names."""
    return parse_body(_operation().spec)


def _run(use_case: UseCase, document: object) -> Response:
    """The use case in one transaction, replayed under an Idempotency-Key when its
    documented operation says it may be."""
    return run_call(use_case, document, replayable=_operation().replayable)


Body = dict[str, str | None]


def in_one_call(use_case: Callable[[Connection, Body], Reply]) -> Callable[[], Response]:
    """A view that runs `use_case` on the checked body, in one call (_run)."""

    @functools.wraps(use_case)
    def view() -> Response:
        values, document = _checked_body()
        return _run(lambda conn: use_case(conn, values), document)

    return view


@bp.post("/signups")
def signups() -> Response:
    values, document = _checked_body()
    redirect_url = allowed_redirect(current_caller().app, values["redirect_url"])

    def sign_up(conn: Connection) -> Reply:
        actions.sign_up(
            conn,
            services(),
            email=str(values["email"]),
            password=str(values["password"]),
            redirect_url=redirect_url,
            app=current_caller().app,
            locale=values["locale"],
        )
        return json_reply(202, {"status": "verification_sent"})

    return _run(sign_up, document)


def _link_request(request_link: Callable[..., bool]) -> Response:
    """A verification, reset or sign-in request: 202 accepted whatever the account (SPEC §5)."""
    values, document = _checked_body()
    redirect_url = allowed_redirect(current_caller().app, values["redirect_url"])

    def call(conn: Connection) -> Reply:
        request_link(
            conn, services(), email=str(values["email"]), redirect_url=redirect_url,
            app=current_caller().app, locale=values["locale"],
        )
        return json_reply(202, {"status": "accepted"})

    return _run(call, document)


@bp.post("/verifications")
def verifications() -> Response:
    return _link_request(actions.request_verification)


def _confirm(
    by_token: Callable[..., T], by_code: Callable[..., T],
    answer: Callable[[T], Reply], *, fields: tuple[str, ...] = (), **given: object,
) -> Response:
    """A confirm endpoint: the emailed link's token, or the emailed code typed with the
    address, redeemed in one call (with the body's `fields` and `given`), then `answer`."""
    values, document = _checked_body()
    code = token_or_code(values)  # 400 before any transaction when it is neither form
    extra = {name: values[name] for name in fields} | given

    def redeem(conn: Connection) -> Reply:
        if code is None:
            done = by_token(conn, services(), token=values["token"], **extra)
        else:
            done = by_code(conn, services(), email=code.email, code=code.code, **extra)
        return answer(done)

    return _run(redeem, document)


@bp.post("/verifications/confirm")
def verifications_confirm() -> Response:
    return _confirm(
        actions.confirm_verification, actions.confirm_verification_code,
        lambda user: json_reply(200, {"email": user.email, "verified": True}),
        fields=("password",))


@bp.post("/password-resets")
def password_resets() -> Response:
    return _link_request(actions.request_password_reset)


@bp.post("/password-resets/confirm")
def password_resets_confirm() -> Response:
    return _confirm(
        actions.reset_password, actions.reset_password_with_code,
        lambda _user: json_reply(200, {"status": "password_changed"}),
        fields=("password", "locale"))


@bp.post("/sessions")
@in_one_call
def sessions(conn: Connection, values: Body) -> Reply:
    # Never replayed (its Operation says so): a stored 200 would still let the old
    # password in after a reset. Checking credentials has no effect to repeat.
    user = actions.authenticate(
        conn, services(), email=str(values["email"]), password=str(values["password"]))
    # Only a proven address gets here (actions.authenticate).
    summary = {"id": user.id, "email": user.email, "email_verified": True}
    return json_reply(200, {"user": summary})


# --- an address over its life (SPEC §12) -------------------------------------------


@bp.post("/email-changes")
def email_changes() -> Response:
    values, document = _checked_body()
    email, new_email = str(values["email"]), str(values["new_email"])
    if new_email == email:  # refused before it runs, like any malformed body
        raise invalid_request("/new_email", "is the account's own address")
    password, sign_in_code = password_or_sign_in_code(values)
    redirect_url = allowed_redirect(current_caller().app, values["redirect_url"])

    def request_email_change(conn: Connection) -> Reply:
        email_change.request_email_change(
            conn, services(), email=email, password=password, sign_in_code=sign_in_code,
            new_email=new_email, redirect_url=redirect_url, app=current_caller().app,
            locale=values["locale"],
        )
        # The same answer whether or not the new address is taken (SPEC §12).
        return json_reply(202, {"status": "confirmation_sent"})

    return _run(request_email_change, document)


@bp.post("/email-changes/confirm")
def email_changes_confirm() -> Response:
    return _change_side("email_change")


@bp.post("/email-changes/approve")
def email_changes_approve() -> Response:
    return _change_side("email_change_approval")


def _change_side(purpose: str) -> Response:
    """A change's link or code from the new address (`email_change`) or the old one
    (`email_change_approval`): the change, or 202 while the other address is awaited."""
    return _confirm(email_change.confirm_email_change, email_change.confirm_email_change_code,
                    _change_answer, fields=("locale",), app=current_caller().app,
                    purpose=purpose)


def _change_answer(outcome: email_change.ChangedAddress | email_change.Pending) -> Reply:
    if isinstance(outcome, email_change.Pending):
        return json_reply(202, {"status": f"awaiting_{outcome.awaiting}"})
    return json_reply(200, {"email": outcome.user.email,
                            "previous_email": outcome.previous_email})


@bp.post("/email-changes/undo")
@in_one_call
def email_changes_undo(conn: Connection, values: Body) -> Reply:
    restored = email_change.undo_email_change(
        conn, services(), token=values["token"], password=values["password"],
        app=current_caller().app, locale=values["locale"])
    return json_reply(200, {"email": restored.email})


@bp.post("/account-deletions")
def account_deletions() -> Response:
    values, document = _checked_body()
    password, sign_in_code = password_or_sign_in_code(values)

    def request_account_deletion(conn: Connection) -> Reply:
        deletion.request_account_deletion(
            conn, services(), email=str(values["email"]), password=password,
            sign_in_code=sign_in_code, app=current_caller().app, locale=values["locale"],
        )
        return json_reply(202, {"status": "confirmation_sent"})

    return _run(request_account_deletion, document)


@bp.post("/account-deletions/confirm")
def account_deletions_confirm() -> Response:
    return _confirm(
        deletion.confirm_account_deletion,
        deletion.confirm_account_deletion_code, lambda _none: json_reply(200, {"deleted": True}))


# --- sign in by email (SPEC §13) ---------------------------------------------------


@bp.post("/sign-in-links")
def sign_in_links() -> Response:
    return _link_request(actions.request_sign_in)


@bp.post("/sign-in-links/confirm")
def sign_in_links_confirm() -> Response:
    def answer(signed_in: sign_in.SignedIn) -> Reply:
        user = signed_in.user
        summary = {"id": user.id, "email": user.email, "email_verified": True}
        return json_reply(200, {"user": summary, "created": signed_in.created})

    return _confirm(sign_in.sign_in_with_link, sign_in.sign_in_with_code, answer)
