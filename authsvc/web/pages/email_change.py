"""Changing the address from /account, confirming it, and undoing it (SPEC §12).

- POST /account/email: the new address and the current password; the link and
  code go to the new address, the page says so (and nothing about whether
  the address is taken).
- /email-change/confirm?token= and /email-change/code: GET/HEAD only show
  what will happen and a button (mail scanners open links); the POST moves
  the account.
- /email-change/approve?token= and /email-change/approve/code: the same for
  the old address's approval (AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD); whichever
  side comes first says the change waits for the other.
- /email-change/undo?token=: the same, for the undo link sent to the old
  address; the page says every session ends and offers a new-password field.
"""

from __future__ import annotations

import logging

from flask import Blueprint
from flask.typing import ResponseReturnValue

from authsvc.accounts import change_records, email_change, links
from authsvc.accounts.addresses import masked
from authsvc.accounts.email_change import ChangedAddress, EmailTaken, Pending
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.tokens import TokenError
from authsvc.accounts.users import User
from authsvc.observability.logs import log_event
from authsvc.web.pages.account import (
    proof_form,
    proof_of,
    request_from_account,
    signed_in_only,
)
from authsvc.web.pages.codes import refused_code
from authsvc.web.pages.forms import (
    ApprovalCodeForm,
    ApproveChangeForm,
    ChangeCodeForm,
    ChangeEmailForm,
    ConfirmChangeForm,
    UndoChangeForm,
)
from authsvc.web.pages.i18n import gettext
from authsvc.web.pages.language import email_locale
from authsvc.web.pages.link_problem import (
    link_form,
    link_page,
    link_problem,
    posted_token_and_password,
)
from authsvc.web.pages.refusals import translated_refusal
from authsvc.web.pages.rendering import render_page
from authsvc.web.pages.session_cookie import end_this_session, forget_cached_session
from authsvc.web.plumbing import db, services

logger = logging.getLogger(__name__)


@signed_in_only
def request_change(signed_in: SessionUser) -> ResponseReturnValue:
    """Send a confirmation link to the new address; nothing changes until it is used."""
    form = proof_form(ChangeEmailForm(), signed_in)
    return request_from_account(
        form, lambda: email_change.request_email_change(
            db(), services(), email=signed_in.user.email, new_email=form.new_email.data,
            **proof_of(form, signed_in), locale=email_locale()),
        event="email_change_requested", user_id=signed_in.user.id,
        # The same words whether or not the address is taken (its holder is told instead).
        sent=lambda: gettext("We sent a link to %(email)s. Your address changes only when it"
                             " is used; until then, sign in as before.",
                             email=form.new_email.data))


# Each side of a change: the new address's confirmation, the old address's approval.
LINK_FORMS: dict[str, type[ConfirmChangeForm | ApproveChangeForm]] = {
    "email_change": ConfirmChangeForm, "email_change_approval": ApproveChangeForm}
CODE_FORMS: dict[str, type[ChangeCodeForm | ApprovalCodeForm]] = {
    "email_change": ChangeCodeForm, "email_change_approval": ApprovalCodeForm}


def confirm_change() -> ResponseReturnValue:
    """GET/HEAD show where the account will move; only the POST moves it."""
    return _side_link("email_change")


def approve_change() -> ResponseReturnValue:
    """The same, for the approval link sent to the old address."""
    return _side_link("email_change_approval")


def _side_link(purpose: str) -> ResponseReturnValue:
    approving = purpose == "email_change_approval"

    def about(user: User) -> dict[str, object]:
        # The old mailbox sees the new address masked, as its email shows it.
        new_email = user.pending_email or ""
        return {"old_email": user.email, "new_email": masked(new_email) if approving
                else new_email, "approving": approving}

    def redeem() -> ResponseReturnValue:
        form = LINK_FORMS[purpose]()
        token = form.token.data if form.validate_on_submit() else None
        try:
            outcome = email_change.confirm_email_change(
                db(), services(), token=token, purpose=purpose,
                locale=email_locale())
        except TokenError as exc:
            return link_problem(exc, purpose, token)
        except EmailTaken:
            return render_page("email_taken.html", 409)
        return _outcome_page(outcome, purpose, by="link")

    return link_page(purpose, redeem,
                     link_form(LINK_FORMS[purpose], "email_change_confirm.html", about))


def change_code() -> ResponseReturnValue:
    """The change email's code, typed with the new address."""
    return _side_code("email_change")


def approval_code() -> ResponseReturnValue:
    """The approval email's code, typed with the old address."""
    return _side_code("email_change_approval")


def _side_code(purpose: str) -> ResponseReturnValue:
    form = CODE_FORMS[purpose]()
    if not form.validate_on_submit():
        return render_page("account_code.html", 422 if form.errors else 200, form=form,
                           purpose=purpose)
    try:
        outcome = email_change.confirm_email_change_code(
            db(), services(), email=form.email.data, code=form.code.data, purpose=purpose,
            locale=email_locale())
    except TokenError as exc:
        return refused_code("account_code.html", form, exc, purpose=purpose)
    except EmailTaken:
        return render_page("email_taken.html", 409)
    return _outcome_page(outcome, purpose, by="code")


def _outcome_page(outcome: ChangedAddress | Pending, purpose: str,
                  *, by: str) -> ResponseReturnValue:
    if isinstance(outcome, Pending):
        log_event(logger, "email_change_side_redeemed", purpose=purpose, by=by)
        return render_page("email_change_pending.html", awaiting=outcome.awaiting)
    log_event(logger, "email_changed", user_id=outcome.user.id, by=by)
    forget_cached_session()
    return render_page("email_changed.html", email=outcome.user.email,
                       previous_email=outcome.previous_email)


def undo_change() -> ResponseReturnValue:
    """GET/HEAD show what the undo will do; only the POST undoes."""
    return link_page("email_revert", _redeem_undo, _undo_page)


def _restored_address(token: object) -> str:
    claims = services().tokens.read(token, "email_revert")
    change = change_records.find_change(db(), claims.user_id, claims.version)
    assert change is not None  # the link was just checked
    return change.old_email


def _undo_page(token: str, user: User, form: UndoChangeForm | None = None,
               status: int = 200) -> ResponseReturnValue:
    return render_page("email_change_undo.html", status,
                       form=form or UndoChangeForm(formdata=None, token=token),
                       current_email=user.email, restored_email=_restored_address(token))


def _redeem_undo() -> ResponseReturnValue:
    form = UndoChangeForm()
    token, password = posted_token_and_password(form)
    try:
        restored = email_change.undo_email_change(db(), services(), token=token,
                                                  password=password,
                                                  locale=email_locale())
    except TokenError as exc:
        return link_problem(exc, "email_revert", token)
    except EmailTaken:
        return render_page("email_taken.html", 409, undo=True)
    except WeakPassword as exc:
        form.password.errors = [translated_refusal(exc)]
        try:
            user = links.check_link(db(), services(), token, "email_revert")
        except TokenError as gone:
            return link_problem(gone, "email_revert", token)
        return _undo_page(str(token), user, form, 422)
    log_event(logger, "email_restored", user_id=restored.id)
    end_this_session()  # every session ended, this one too
    return render_page("email_restored.html", email=restored.email,
                       password_set=password is not None)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/account/email", view_func=request_change, methods=["POST"])
    bp.add_url_rule("/email-change/confirm", view_func=confirm_change, methods=["GET", "POST"])
    bp.add_url_rule("/email-change/code", view_func=change_code, methods=["GET", "POST"])
    bp.add_url_rule("/email-change/approve", view_func=approve_change, methods=["GET", "POST"])
    bp.add_url_rule("/email-change/approve/code", view_func=approval_code,
                    methods=["GET", "POST"])
    bp.add_url_rule("/email-change/undo", view_func=undo_change, methods=["GET", "POST"])
