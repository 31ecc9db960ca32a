"""What every emailed link and code shares, whatever its purpose: the engine of the flows.

A flow (verify, reset, sign-in, an address change, its undo, a deletion)
is a use case that queues a link with this module's helpers and redeems it
through them: the email budget per purpose, the payload naming the asking
app, the account whose current link a token or a typed code describes, why
a validly signed link no longer redeems, and what completing a flow tells
the apps. The use cases live in actions.py, sign_in.py, email_change.py and
deletion.py.
"""

from __future__ import annotations

import logging
from datetime import datetime

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts import change_records, code_tries, sessions, users
from authsvc.accounts.passwords import check_policy
from authsvc.accounts.tokens import TokenClaims, TokenError, is_code_shaped
from authsvc.accounts.users import User
from authsvc.app_events.producer import FlowApp, flow_app, queue_event, user_data
from authsvc.apps import account_apps
from authsvc.apps.keys import App
from authsvc.locales import supported_locale
from authsvc.observability.logs import log_event
from authsvc.ratelimit import RateLimitHit
from authsvc.services import Services

logger = logging.getLogger(__name__)
# The payload key of the request's locale (SPEC §14).
LOCALE = "locale"
# The request's tag as it was sent, where it is not a shipped locale itself (de-AT, ja):
# an app's own template may be stored for it (the lookup's first step).
LOCALE_TAG = "locale_tag"


def email_budget(svc: Services, email: str, purpose: str, now: datetime) -> RateLimitHit:
    """The address's email budget for one purpose (AUTHSVC_RATE_LIMIT_EMAIL).

    One budget per purpose, so verification requests cannot use up an
    address's reset emails. Counted for known and unknown addresses alike,
    so the limit reveals nothing; within it the address's code tries start
    afresh, and nothing else gives them back (SQL email_budget_hit()).
    """
    return ratelimit.hit_for(f"email_{purpose}", email, svc.settings.rate_limit_email, now)


def email_payload(
    app: App | None, redirect_url: str | None = None, *, own_account: bool = False,
    locale: str | None = None,
) -> dict[str, object]:
    """What a queued email carries: the link target, the asking app's name, whose account,
    the request's language.

    Every email an app's call queues names that app (authsvc/worker/render.py), so a
    person can tell who asked even when the link opens authsvc's own pages.
    `own_account`: the account was already the app's when this was queued,
    so redeeming it is a flow through the app (account_apps.OWN_ACCOUNT).
    `locale`: the request's (a well-formed tag, API or page), kept as the
    shipped locale it maps to, if any; the worker renders in it, and
    redeeming the link makes it the account's (users.sql record_redemption).
    """
    payload: dict[str, object] = {"redirect_url": redirect_url} if redirect_url else {}
    if own_account:
        payload[account_apps.OWN_ACCOUNT] = True
    shipped = supported_locale(locale)
    if shipped is not None:
        payload[LOCALE] = shipped
    if locale is not None and locale.lower() != (shipped or "").lower():
        payload[LOCALE_TAG] = locale
    return payload | ({"app_name": app.name} if app else {})


def issued_at(now: datetime) -> datetime:
    """A link's issued_at: whole seconds, as the token carries it."""
    return now.replace(microsecond=0)


def stale_link_error(conn: Connection, claims: TokenClaims, user: User | None) -> TokenError:
    """Why a validly signed link no longer redeems, given its account as read now.

    A deleted account's links are links this database never issued.
    """
    if user is None or claims.version > user.version(claims.purpose):
        return TokenError("invalid_token")  # not a link this database issued
    if users.was_redeemed(conn, claims.user_id, claims.purpose, claims.version):
        return TokenError("token_used")
    return TokenError("token_superseded")


def undo_link_error(change: change_records.EmailChange | None) -> TokenError | None:
    """Why an undo link no longer redeems (None: it would). Its change record decides,
    not a version: undo links are exempt from "newest only" (SPEC §12)."""
    if change is None:
        return TokenError("invalid_token")  # no such change, or the account is gone
    if not change.standing:
        # Used, or ended by an undo to an older address: either way the change
        # it would undo was undone.
        return TokenError("token_used")
    return None


# The two sides of an address change that needs both addresses (email_change.py): one
# side's link is used while the version stays current, until the other side's comes in.
TWO_SIDED = ("email_change", "email_change_approval")


def current_holder(conn: Connection, claims: TokenClaims) -> User:
    """The account whose current link these claims describe; TokenError otherwise."""
    user = users.find_user_by_id(conn, claims.user_id)
    if claims.purpose == "email_revert":
        change = change_records.find_change(conn, claims.user_id, claims.version) if user else None
        error = undo_link_error(change)
        if error is not None or user is None:
            raise error or TokenError("invalid_token")
        return user
    if user is None or user.version(claims.purpose) != claims.version:
        raise stale_link_error(conn, claims, user)
    if claims.purpose in TWO_SIDED and users.was_redeemed(conn, user.id, claims.purpose,
                                                          claims.version):
        raise TokenError("token_used")
    return user


def check_link(conn: Connection, svc: Services, token: object, purpose: str) -> User:
    """The link's account if it would redeem now; TokenError otherwise. Changes nothing."""
    return current_holder(conn, svc.tokens.read(token, purpose))


def new_password_hash(svc: Services, password: object, email: str) -> str:
    """The hash of a new password the policy accepts; WeakPassword otherwise."""
    check_policy(password, email)
    assert isinstance(password, str)
    return svc.passwords.hash(password)


def address_proven(conn: Connection, user: User) -> None:
    """What redeeming a link sent to the address settles, in the same transaction.

    No session opened before the proof survives it, and the mailbox's holder
    is never locked out by someone else's failed logins.
    """
    sessions.end_all_sessions(conn, user.id)
    ratelimit.clear(conn, "login", user.email)


def matching_code(
    conn: Connection, svc: Services, email: str, purpose: str, code: object
) -> tuple[code_tries.CodeAttempt, User]:
    """Count one try at `email`'s code and return it with its account if `code` is right.

    `email` is the address the code was sent to: the account's own, or the
    new address of a change, or the old address holding an undo link (a
    deletion while one lives). Unknown addresses, addresses with no code
    outstanding and wrong codes take the same steps (one statement, one HMAC
    per key) and raise the same TokenError("invalid_code"); after five tries
    at the code, or twenty wrong codes for the address this hour (all
    purposes), TokenError("code_exhausted"), even for the right code. The
    try is counted outside any transaction this function opens, so a refused
    code still counts when the caller's transaction commits; a right code
    leaves the hour's count.
    """
    typed = "".join(code.split()) if isinstance(code, str) else ""
    now = svc.clock()
    attempt = code_tries.count_attempt(conn, email, purpose, now)
    claims = attempt.claims_or_dummy()
    right = svc.tokens.code_matches(claims, typed if is_code_shaped(typed) else "")
    if attempt.exhausted or not right or attempt.claims is None:
        refusal = "code_exhausted" if attempt.exhausted else "invalid_code"
        # For alerting on guessing; the address is not logged, nor whether it has an account.
        log_event(logger, "code_refused", purpose=purpose, code=refusal, attempt=attempt.attempt)
        raise TokenError(refusal)
    code_tries.forgive_right_code(conn, email, now)  # the hour counts wrong codes only
    # Only someone holding the code learns that it expired.
    if now >= svc.tokens.expires_at(purpose, claims.issued_at):
        raise TokenError("token_expired")
    user = users.find_user_by_id(conn, claims.user_id)
    if user is None or user.version(purpose) != claims.version:
        raise TokenError("invalid_code")  # redeemed or replaced since the try was counted
    return attempt, user


def flow_completed(
    conn: Connection, user: User, purpose: str, version: int, event_type: str, now: datetime,
    *, first_proof: bool,
) -> FlowApp | None:
    """A redeemed link or code: settle whose account it is, and tell the app that sent it.

    Returns the app whose call sent the link, if one did. A flow is through
    that app only if its email was queued while the account was already the
    app's (`own_account`); so completing a flow never adds an app, and at
    the address's first proof (`first_proof`) the signup's app keeps the
    account only when this was its own email (SPEC §14, account_apps). The
    app that started the flow hears `event_type` either way (SPEC §9).
    """
    flow = flow_app(conn, user_id=user.id, purpose=purpose, version=version)
    if first_proof:
        own_app = flow.id if flow is not None and flow.own_account else None
        account_apps.note_first_proof(conn, user_id=user.id, own_app=own_app)
    queue_event(
        conn, app_id=flow.id if flow else None, event_type=event_type,
        data=user_data(user.id, user.email), user_id=user.id, now=now,
    )
    return flow
