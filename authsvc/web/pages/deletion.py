"""Deleting the account from /account, confirmed from the mailbox (SPEC §12).

- POST /account/delete/request: the current password; a link and code go to
  the account's address (or to the oldest address holding an undo link).
- /account/delete?token= and /account/delete/code: GET/HEAD only say what will
  happen and show a button (a scanner opening the link deletes nothing); the
  POST deletes.
"""

from __future__ import annotations

import logging

from flask import Blueprint
from flask.typing import ResponseReturnValue

from authsvc.accounts import deletion
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.tokens import TokenError
from authsvc.observability.logs import log_event
from authsvc.web.pages.account import (
    proof_form,
    proof_of,
    request_from_account,
    signed_in_only,
)
from authsvc.web.pages.codes import refused_code
from authsvc.web.pages.forms import ConfirmDeletionForm, DeleteAccountForm, DeletionCodeForm
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.link_problem import link_form, link_page, link_problem
from authsvc.web.pages.rendering import render_page
from authsvc.web.pages.session_cookie import end_this_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


@signed_in_only
def request_deletion(signed_in: SessionUser) -> ResponseReturnValue:
    """Send the deletion link; nothing is deleted until it is used."""
    form = proof_form(DeleteAccountForm(), signed_in)
    return request_from_account(
        form, lambda: deletion.request_account_deletion(
            db(), services(), email=signed_in.user.email, **proof_of(form, signed_in),
            locale=email_locale()),
        event="deletion_requested", user_id=signed_in.user.id,
        sent=lambda: gettext("We sent a link to confirm the deletion to your address (or, if it"
                             " was changed lately, to the address it was changed from). Nothing"
                             " is deleted until it is used."))


def delete_account() -> ResponseReturnValue:
    """GET/HEAD show what will be deleted; only the POST deletes."""
    return link_page("account_delete", _redeem,
                     link_form(ConfirmDeletionForm, "account_delete.html"))


def _redeem() -> ResponseReturnValue:
    form = ConfirmDeletionForm()
    token = form.token.data if form.validate_on_submit() else None
    try:
        deletion.confirm_account_deletion(db(), services(), token=token)
    except TokenError as exc:
        return link_problem(exc, "account_delete", token)
    return _deleted()


def _deleted() -> ResponseReturnValue:
    log_event(logger, "account_deleted")
    end_this_session()  # its row went with the account; forget the cookie too
    return render_page("account_deleted.html", with_user=False)


def delete_code() -> ResponseReturnValue:
    """The deletion email's code, typed with the address it came to."""
    form = DeletionCodeForm()
    if not form.validate_on_submit():
        return render_page("account_code.html", 422 if form.errors else 200, form=form,
                           purpose="account_delete")
    try:
        deletion.confirm_account_deletion_code(
            db(), services(), email=form.email.data, code=form.code.data)
    except TokenError as exc:
        return refused_code("account_code.html", form, exc, purpose="account_delete")
    return _deleted()


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/account/delete/request", view_func=request_deletion, methods=["POST"])
    bp.add_url_rule("/account/delete", view_func=delete_account, methods=["GET", "POST"])
    bp.add_url_rule("/account/delete/code", view_func=delete_code, methods=["GET", "POST"])
