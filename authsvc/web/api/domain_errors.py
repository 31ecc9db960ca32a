"""The domain's expected failures as problem replies: what a use case's exception means to an app.

Only exceptions the use cases raise on purpose are mapped here; anything else
reaches the blueprint's handlers (api/problems.py) as a 500 or a 503.
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg import Connection

from authsvc.accounts.actions import InvalidCredentials, PasswordRequired, TooManyAttempts
from authsvc.accounts.email_change import EmailTaken
from authsvc.accounts.passwords import WeakPassword
from authsvc.accounts.tokens import TokenError
from authsvc.web.api.problems import problem_reply
from authsvc.web.api.replies import Reply

UseCase = Callable[[Connection], Reply]
_TOKEN_DETAILS = {
    "invalid_token": "The token is malformed, tampered with, or for another purpose.",
    "token_expired": "The link expired; request a new one.",
    "token_superseded": "A newer link was sent; use the most recent email.",
    "token_used": "This link was already used.",
    "invalid_code": "The code is wrong, was replaced by a newer email, was already used,"
    " or this address has none; check the newest email.",
    "code_exhausted": "Too many wrong codes for this email, or for this address this hour;"
    " use the email's link, or request a new email (if its code is refused too, try it after"
    " the hour).",
}
_BAD_INPUT_CODES = {"invalid_token", "invalid_code"}


def outcome(use_case: UseCase, conn: Connection) -> Reply:
    """Run the use case; the domain's expected failures become problem replies."""
    try:
        return use_case(conn)
    except WeakPassword as exc:
        return problem_reply(422, "weak_password", str(exc))
    except TokenError as exc:
        status = 400 if exc.code in _BAD_INPUT_CODES else 410
        return problem_reply(status, exc.code, _TOKEN_DETAILS.get(exc.code, exc.code))
    except PasswordRequired:
        detail = (
            "More than one signup (or a resend) used this address before it was confirmed:"
            " send `password` with the token or code to choose the account's password."
        )
        return problem_reply(422, "password_required", detail)
    except EmailTaken:
        detail = "A confirmed account uses this address now; nothing was changed."
        return problem_reply(409, "email_taken", detail)
    except InvalidCredentials:
        return problem_reply(401, "invalid_credentials", "The email or password is wrong.")
    except TooManyAttempts as exc:
        retry_after = str(max(exc.retry_after, 1))
        detail = "Too many failed sign-ins for this address; retry later."
        return problem_reply(429, "rate_limited", detail, headers=(("Retry-After", retry_after),))
