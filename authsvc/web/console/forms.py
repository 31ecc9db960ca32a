"""The console's forms: every action is a POST carrying the session's CSRF token."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import EmailField, PasswordField, StringField, SubmitField
from wtforms.validators import InputRequired, Length

from authsvc.accounts.addresses import MAX_ADDRESS_LENGTH
from authsvc.accounts.passwords import MAX_LENGTH as MAX_PASSWORD_LENGTH
from authsvc.accounts.tokens import MAX_CODE_LENGTH
from authsvc.web.pages.i18n import lazy_gettext as _l


class ConsoleLoginForm(FlaskForm):
    email = EmailField(_l("Email address"),
                       validators=[InputRequired(_l("Enter your email address.")),
                                   Length(max=MAX_ADDRESS_LENGTH)],
                       render_kw={"autocomplete": "username"})
    password = PasswordField(_l("Password"),
                             validators=[InputRequired(_l("Enter your password.")),
                                         Length(max=MAX_PASSWORD_LENGTH)],
                             render_kw={"autocomplete": "current-password"})
    submit = SubmitField(_l("Continue"))


class ConsoleCodeForm(FlaskForm):
    code = StringField(_l("Code from the email or your authenticator app"),
                       validators=[InputRequired(_l("Enter the code.")),
                                   Length(max=MAX_CODE_LENGTH)],
                       render_kw={"autocomplete": "one-time-code", "inputmode": "numeric"})
    submit = SubmitField(_l("Sign in"))


class ActionForm(FlaskForm):
    """A button: the action is in the URL, the form carries only the CSRF token."""

    submit = SubmitField(_l("Go"))
