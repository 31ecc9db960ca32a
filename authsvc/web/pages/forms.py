"""The web forms: field rules only; what a submission does lives in the views.

Every FlaskForm carries the session's CSRF token, so a POST that did not come
from a page this server rendered for the same browser is refused.
"""

from __future__ import annotations

from babel.support import LazyProxy
from flask_wtf import FlaskForm
from wtforms import EmailField, HiddenField, PasswordField, StringField, SubmitField
from wtforms.validators import InputRequired, Length, Optional, ValidationError

from authsvc.accounts.addresses import MAX_ADDRESS_LENGTH, InvalidAddress, parse_address
from authsvc.accounts.passwords import MAX_LENGTH as MAX_PASSWORD_LENGTH
from authsvc.accounts.tokens import MAX_CODE_LENGTH, MAX_TOKEN_LENGTH
from authsvc.web.pages.i18n import lazy_gettext as _l
from authsvc.web.pages.i18n import lazy_ngettext as _ln
from authsvc.web.pages.refusals import translated_refusal


def _normalised_email(_form: FlaskForm, field: EmailField) -> None:
    """Replace the typed address with its normal form, or explain what is wrong."""
    try:
        field.data = parse_address(field.data)
    except InvalidAddress as exc:
        raise ValidationError(translated_refusal(exc)) from None


def _email_field(label: str | LazyProxy | None = None) -> EmailField:
    return EmailField(
        _l("Email address") if label is None else label,
        validators=[InputRequired(_l("Enter your email address.")), _normalised_email],
        render_kw={"autocomplete": "email", "maxlength": MAX_ADDRESS_LENGTH},
    )


_TOO_LONG = _ln("Use at most %(num)s character.", "Use at most %(num)s characters.",
                MAX_PASSWORD_LENGTH)


def _password_field(label: str | LazyProxy, autocomplete: str) -> PasswordField:
    # The policy itself (length, common passwords) is checked by the use case;
    # the cap here only keeps absurd input away from the hasher.
    return PasswordField(
        label,
        validators=[
            InputRequired(_l("Enter a password.")),
            Length(max=MAX_PASSWORD_LENGTH, message=_TOO_LONG),
        ],
        render_kw={"autocomplete": autocomplete},
    )


def _chosen_password_field(label: str | LazyProxy | None = None) -> PasswordField:
    """An optional new password: a contested address's confirmer's (SPEC §4a), an undo's."""
    return PasswordField(
        _l("Choose your password") if label is None else label,
        validators=[Optional(), Length(max=MAX_PASSWORD_LENGTH, message=_TOO_LONG)],
        render_kw={"autocomplete": "new-password"},
    )


class LinkForm(FlaskForm):
    """A form on a link's page: the link's token rides in a hidden field."""

    token = HiddenField(validators=[Length(max=MAX_TOKEN_LENGTH)])


class SignupForm(FlaskForm):
    email = _email_field()
    password = _password_field(_l("Password"), "new-password")
    submit = SubmitField(_l("Create account"))


class LoginForm(FlaskForm):
    email = _email_field()
    password = _password_field(_l("Password"), "current-password")
    submit = SubmitField(_l("Log in"))


class EmailForm(FlaskForm):
    """Asks for an address to send a link to (reset or verification)."""

    email = _email_field()
    submit = SubmitField(_l("Send link"))


class ConfirmEmailForm(LinkForm):
    """The button a person clicks to redeem a verification link.

    For a contested address (several signups before anyone confirmed it) the
    page also asks for the password, which the confirmer chooses here.
    """

    password = _chosen_password_field()
    submit = SubmitField(_l("Confirm my email address"))


class NewPasswordForm(LinkForm):
    """Sets a new password with a reset link."""

    password = _password_field(_l("New password"), "new-password")
    submit = SubmitField(_l("Set new password"))


def _code_field() -> StringField:
    # Six digits, but typed by people: spaces are ignored and anything else is
    # judged (and counted) like a wrong code, so the form reveals nothing.
    return StringField(
        _l("Code from the email"),
        validators=[
            InputRequired(_l("Enter the 6-digit code from the email.")),
            Length(max=MAX_CODE_LENGTH),
        ],
        render_kw={
            "autocomplete": "one-time-code", "inputmode": "numeric", "maxlength": MAX_CODE_LENGTH,
        },
    )


class VerifyCodeForm(FlaskForm):
    """Confirms an address with the emailed code, for people reading mail elsewhere.

    The password field is shown when the address turns out to be contested.
    """

    email = _email_field()
    code = _code_field()
    password = _chosen_password_field()
    submit = SubmitField(_l("Confirm my email address"))


class ResetCodeForm(FlaskForm):
    """Sets a new password with the code from a reset email."""

    email = _email_field()
    code = _code_field()
    password = _password_field(_l("New password"), "new-password")
    submit = SubmitField(_l("Set new password"))


class SignInForm(LinkForm):
    """The button a person clicks to sign in with an emailed link (SPEC §13).

    When signing in discards a password set before the address was proven,
    the page also offers to choose one here (optional).
    """

    password = _chosen_password_field()
    submit = SubmitField(_l("Sign in"))


class SignInCodeForm(FlaskForm):
    """Signs in with the code from a sign-in email, for people reading mail elsewhere."""

    email = _email_field()
    code = _code_field()
    submit = SubmitField(_l("Sign in"))


class ResendForm(LinkForm):
    """Sends a fresh link to whoever an expired or replaced link was for."""

    purpose = HiddenField(validators=[InputRequired()])
    submit = SubmitField(_l("Send a new link"))


class ChangePasswordForm(FlaskForm):
    current = _password_field(_l("Current password"), "current-password")
    new = _password_field(_l("New password"), "new-password")
    submit = SubmitField(_l("Change password"))


class LogoutForm(FlaskForm):
    submit = SubmitField(_l("Log out"))


class EndSessionForm(FlaskForm):
    """Ends one session by id, or every session with the value "all"."""

    session_id = HiddenField(validators=[InputRequired(), Length(max=20)])
    submit = SubmitField(_l("End session"))


# --- an address over its life (SPEC §12) -------------------------------------------


class ChangeEmailForm(FlaskForm):
    """On /account: the new address, and the current password that allows asking."""

    new_email = _email_field(_l("New email address"))
    current = _password_field(_l("Current password"), "current-password")
    submit = SubmitField(_l("Send a confirmation link"))


class DeleteAccountForm(FlaskForm):
    """On /account: the current password that allows asking for a deletion link."""

    current = _password_field(_l("Current password"), "current-password")
    submit = SubmitField(_l("Delete account"))


class ConfirmChangeForm(LinkForm):
    """The button a person clicks to confirm a new address from its link."""

    submit = SubmitField(_l("Confirm my new email address"))


class ApproveChangeForm(LinkForm):
    """The button a person clicks to approve, from the old address, a change away from it."""

    submit = SubmitField(_l("Approve the change"))


class UndoChangeForm(LinkForm):
    """The undo page: the button, and an optional new password (else a reset link is sent)."""

    password = _chosen_password_field(_l("New password (optional)"))
    submit = SubmitField(_l("Undo the change"))


class ConfirmDeletionForm(LinkForm):
    """The button a person clicks to delete the account from its link."""

    submit = SubmitField(_l("Delete my account"))


class ChangeCodeForm(FlaskForm):
    """Confirms a new address with the emailed code, typed with that address."""

    email = _email_field(_l("New email address"))
    code = _code_field()
    submit = SubmitField(_l("Confirm my new email address"))


class ApprovalCodeForm(FlaskForm):
    """Approves a change with the code emailed to the old address, typed with that address."""

    email = _email_field(_l("Current email address"))
    code = _code_field()
    submit = SubmitField(_l("Approve the change"))


class DeletionCodeForm(FlaskForm):
    """Deletes the account with the emailed code, typed with the address it came to."""

    email = _email_field()
    code = _code_field()
    submit = SubmitField(_l("Delete my account"))
