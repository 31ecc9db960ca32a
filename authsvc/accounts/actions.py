"""Account use cases: one function per user action, one transaction each.

Each function takes a connection from the caller (so the JSON API can put
its idempotency record in the same transaction) and opens its own
`conn.transaction()` block, which nests as a savepoint when the caller
already has one; a link request is a single statement instead, which is a
transaction of its own or part of the caller's. Email is only ever queued
here, never sent. What every flow shares (budgets, payloads, the account a
link or code names) is links.py's; redeeming a sign-in link is
sign_in.py's (its request is here, with the other link requests), an
address change and its undo are email_change.py's, a deletion deletion.py's.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from functools import partial

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts import code_tries, links, sessions, sign_in, users
from authsvc.accounts.passwords import check_policy
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.tokens import TokenClaims
from authsvc.accounts.users import User
from authsvc.apps import account_apps
from authsvc.apps.keys import App
from authsvc.locales import supported_locale
from authsvc.outbox import NO_OUTCOME_EVENTS, count_and_queue_link, enqueue_email
from authsvc.services import Services

logger = logging.getLogger(__name__)


class InvalidCredentials(Exception):
    """Wrong address or password, or an address nobody has proven yet: one answer for all."""


class TooManyAttempts(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class SessionEnded(Exception):
    """The session was ended (logout, password change) or has expired."""


class PasswordRequired(Exception):
    """A contested address is confirmed only together with a new password (SPEC §4a)."""


def sign_up(
    conn: Connection,
    svc: Services,
    *,
    email: str,
    password: str,
    redirect_url: str | None = None,
    app: App | None = None,
    locale: str | None = None,
) -> None:
    """Create an account (or record another signup for it) and queue its email.

    A taken address answers the same way: its owner gets "account exists"
    if the address is verified, else a fresh verification link. Whoever signs
    up, the password stays unusable until someone redeems a link sent to the
    address; a second signup makes the address contested (users.sql).
    `app`: the app whose API call this is; the account becomes its when this
    signup creates it, and `redirect_url` applies only to its own accounts
    (a contested unproven address is nobody's: account_apps). `locale`: the
    request's; a new account keeps it (SPEC §14), and the email is in it.
    """
    check_policy(password, email)
    # Hash before touching the row: every branch costs one argon2 hash.
    password_hash = svc.passwords.hash(password)
    now = svc.clock()
    with conn.transaction():
        user = users.register_signup(conn, email, password_hash, supported_locale(locale))
        own = app is not None and account_apps.note_signup(
            conn, user_id=user.id, app_id=app.id, now=now
        )
        if not own:
            redirect_url = None  # another app's, the pages' or a contested account: our pages
        app_id = app.id if app else None
        if not code_tries.count_email(conn, links.email_budget(svc, email, "verify", now), email,
                                 "verify").allowed:
            return  # the earlier links are retired all the same
        if user.verified:
            enqueue_email(
                conn, template="account_exists", recipient=email, user_id=user.id,
                payload=links.email_payload(app, locale=locale), app_id=app_id,
            )
            return
        enqueue_email(
            conn,
            template="verify",
            recipient=user.email,
            user_id=user.id,
            purpose="verify",
            token_version=user.verify_version,
            issued_at=links.issued_at(now),
            payload=links.email_payload(app, redirect_url, own_account=own, locale=locale),
            app_id=app_id,
        )


def request_link(
    conn: Connection,
    svc: Services,
    *,
    purpose: str,
    email: str,
    redirect_url: str | None = None,
    app: App | None = None,
    locale: str | None = None,
) -> bool:
    """Queue a fresh `purpose` link: reset and sign_in for any account, verify for an
    unverified one.

    An address with no account gets nothing, except a sign-in link when the
    app signs up by email (SPEC §13: a placeholder account holds its
    version), or else, with AUTHSVC_NOTIFY_UNKNOWN_ADDRESSES, a reset or
    sign-in request's "no account uses this address" note, within the same
    budget: only the mailbox holder learns it. Silent otherwise.

    False when the address's email limit held it back (callers must not
    tell the requester: the answer would then differ for known and unknown
    addresses). `redirect_url` applies only when the
    account belongs to `app` (queue_link decides, in the same statement, and
    marks the email as the app's own).
    """
    now = svc.clock()
    # One statement (outbox/producer.sql queue_link): the count, the fresh
    # code tries and the queued link commit together, so a known address's
    # request is one commit like an unknown one's (whose count alone is a
    # write); a second commit would wait for a second WAL flush, and the
    # delay would tell accounts apart (tests/test_api_timing.py). One round
    # trip where a transaction of three statements took five.
    # A request for an unknown address queues nothing, so its outcome must
    # not reach the app as an email.* event: that would tell the app which
    # addresses have accounts. The app still hears user.* events, which
    # only the mailbox's holder can cause.
    return count_and_queue_link(
        conn, email=email, purpose=purpose, issued_at=links.issued_at(now),
        budget=links.email_budget(svc, email, purpose, now),
        code_digest=code_tries.address_digest(email),
        payload={**links.email_payload(app, redirect_url, locale=locale),
                 NO_OUTCOME_EVENTS: True},
        app_id=app.id if app else None,
        sign_up=purpose == "sign_in" and app is not None and app.sign_up_by_email,
        notify_unknown=svc.settings.notify_unknown_addresses and purpose != "verify",
    ).allowed


# The three flows' requests differ only by purpose.
request_verification = partial(request_link, purpose="verify")
request_password_reset = partial(request_link, purpose="reset")
request_sign_in = partial(request_link, purpose="sign_in")
# The purposes a person may ask again by address alone (the pages' "send a new link").
LINK_REQUESTS = {"verify": request_verification, "reset": request_password_reset,
                 "sign_in": request_sign_in}


def confirm_verification(
    conn: Connection, svc: Services, *, token: object, password: object = None
) -> User:
    """Redeem a verification link: exactly once, only the newest.

    A contested address needs `password` (PasswordRequired otherwise); any
    address may be given one, which replaces the password its signups set.
    """
    claims = svc.tokens.read(token, "verify")
    user = links.current_holder(conn, claims)
    if password is None and user.contested:
        raise PasswordRequired()
    password_hash = None if password is None else links.new_password_hash(svc, password, user.email)
    return _redeem_verify(conn, svc, user, claims, password_hash)


def _redeem_verify(
    conn: Connection, svc: Services, user: User, claims: TokenClaims, password_hash: str | None
) -> User:
    now = svc.clock()
    with conn.transaction():
        # The conditional UPDATE is the single-use guard: a concurrent redeemer
        # waits on the row lock, then re-checks the version and matches nothing.
        redeemed = users.redeem_verify_link(conn, user.id, claims.version, password_hash, now)
        if redeemed is None:  # lost a race with a redemption or a newer signup
            latest = users.find_user_by_id(conn, user.id)
            if latest is not None and latest.version("verify") == claims.version:
                raise PasswordRequired()
            raise links.stale_link_error(conn, claims, latest)
        users.record_redemption(conn, redeemed.id, "verify", claims.version, now)
        links.address_proven(conn, redeemed)
        # Only an unproven address redeems a verify link (redeem_verify_link).
        links.flow_completed(conn, redeemed, "verify", claims.version, "user.verified", now,
                             first_proof=True)
    return redeemed


def reset_password(
    conn: Connection, svc: Services, *, token: object, password: object,
    locale: str | None = None,
) -> User:
    """Redeem a reset link: set the password, prove the address, end every session.

    `locale`: the request's, for the "password changed" notice only (SPEC §14:
    the account takes the redeemed link's, never a request's)."""
    claims = svc.tokens.read(token, "reset")
    # Reject a stale link before judging the password: "use the newest email"
    # is the more useful answer.
    user = links.current_holder(conn, claims)
    password_hash = links.new_password_hash(svc, password, user.email)
    return _redeem_reset(conn, svc, user, claims, password_hash, locale)


def _redeem_reset(
    conn: Connection, svc: Services, user: User, claims: TokenClaims, password_hash: str,
    locale: str | None,
) -> User:
    now = svc.clock()
    with conn.transaction():
        result = users.redeem_reset_link(conn, user.id, claims.version, password_hash, now)
        if result is None:  # lost a race with another redemption or a newer link
            raise links.stale_link_error(conn, claims, users.find_user_by_id(conn, user.id))
        redeemed = result.user
        users.record_redemption(conn, redeemed.id, "reset", claims.version, now)
        links.address_proven(conn, redeemed)
        # Whether the address was unproven comes from the row the redemption
        # locked, not from `user` (read before a concurrent verify could commit).
        flow = links.flow_completed(
            conn, redeemed, "reset", claims.version, "user.password_changed", now,
            first_proof=result.first_proof,
        )
        # The notice names the app whose reset was used, like the reset did.
        named = {"app_name": flow.name} if flow else {}
        enqueue_email(
            conn, template="password_changed", recipient=redeemed.email, user_id=redeemed.id,
            payload={**named, **links.email_payload(None, locale=locale)} or None,
            app_id=flow.id if flow else None,
        )
    return redeemed


def confirm_verification_code(
    conn: Connection, svc: Services, *, email: str, code: object, password: object = None
) -> User:
    """Redeem the code from a verification email, typed with its address (SPEC §4 "Codes").

    The same rules as the link: newest only, once, within the lifetime, and a
    contested address is confirmed only together with a new password.
    """
    if password is not None:
        check_policy(password, email)  # judged before a try is counted: it says nothing
    attempt, user = links.matching_code(conn, svc, email, "verify", code)
    if password is None and user.contested:
        code_tries.give_back_attempt(conn, email, attempt)
        raise PasswordRequired()
    password_hash = None if password is None else links.new_password_hash(svc, password, user.email)
    assert attempt.claims is not None
    return _redeem_verify(conn, svc, user, attempt.claims, password_hash)


def reset_password_with_code(
    conn: Connection, svc: Services, *, email: str, code: object, password: object,
    locale: str | None = None,
) -> User:
    """Redeem the code from a reset email: set the password, prove the address, end sessions."""
    check_policy(password, email)
    attempt, user = links.matching_code(conn, svc, email, "reset", code)
    password_hash = links.new_password_hash(svc, password, user.email)
    assert attempt.claims is not None
    return _redeem_reset(conn, svc, user, attempt.claims, password_hash, locale)


def _count_password_attempt(conn: Connection, svc: Services, email: str) -> None:
    # Counted before checking: with read-then-count, concurrent guesses would
    # all pass while argon2 runs. A success gives its count back.
    decision = ratelimit.hit(conn, "login", email, svc.settings.rate_limit_login, svc.clock())
    if not decision.allowed:
        raise TooManyAttempts(decision.retry_after)


def authenticate(conn: Connection, svc: Services, *, email: str, password: str) -> User:
    """The account for these credentials, once its address is proven.

    An unproven account fails exactly like a wrong password (same exception,
    same work), so logging in reveals nothing about an address's state.
    """
    _count_password_attempt(conn, svc, email)
    user = users.find_user_by_email(conn, email)
    # An unknown address still pays for one verification (timing).
    matches = svc.passwords.verify(user.password_hash if user else None, password)
    if user is None or not matches or not user.verified:
        raise InvalidCredentials()
    ratelimit.refund(conn, "login", email, svc.settings.rate_limit_login, svc.clock())
    if svc.passwords.needs_rehash(user.password_hash):
        # Only over the hash we verified: a reset committed meanwhile must win.
        rehashed = svc.passwords.hash(password)
        if not users.update_password_hash(conn, user.id, user.password_hash, rehashed):
            raise InvalidCredentials()
        user = replace(user, password_hash=rehashed)
    return user


# SPEC §12 "Pages": how lately a session must have been started by a sign-in
# link or code for an account with no password to change its address or delete itself.
RECENT_SIGN_IN = timedelta(minutes=10)


def confirm_identity(
    conn: Connection,
    svc: Services,
    *,
    email: str,
    password: str | None = None,
    sign_in_code: str | None = None,
    session: SessionUser | None = None,
) -> User:
    """The account that may ask for an address change or a deletion (SPEC §12), by one proof:

    its password; or, for an account with no password, a current sign-in
    code (used up here) or a web session a sign-in link or code started in
    the last RECENT_SIGN_IN. Anything else fails like a wrong password
    (InvalidCredentials); a password or a code typed is counted against the
    login limit first (TooManyAttempts), as at sign-in.
    """
    if password is not None:
        return authenticate(conn, svc, email=email, password=password)
    if session is not None:
        since = svc.clock() - RECENT_SIGN_IN
        if session.user.email != email or session.user.has_password \
                or not session.signed_in_by_email_since(since):
            raise InvalidCredentials()
        return session.user
    _count_password_attempt(conn, svc, email)
    user = sign_in.use_sign_in_code(conn, svc, email=email, code=sign_in_code)
    if user is None:
        raise InvalidCredentials()
    ratelimit.refund(conn, "login", email, svc.settings.rate_limit_login, svc.clock())
    return user


def start_session(conn: Connection, svc: Services, *, user: User, user_agent: str) -> str:
    """A server-side web session for an authenticated account; returns the cookie's token.

    Refused like a wrong password when the password changed after `user` was
    authenticated: a login racing the owner's reset must not outlive it.
    """
    token = sessions.start_session(conn, user, user_agent, svc.clock())
    if token is None:
        raise InvalidCredentials()
    return token


def current_session(conn: Connection, svc: Services, token: str) -> SessionUser | None:
    """The live session behind a cookie's token, or None when it was ended or expired."""
    return sessions.find_session(conn, token, svc.clock())


def change_password(
    conn: Connection,
    svc: Services,
    *,
    session: SessionUser,
    current: str,
    new: object,
) -> User:
    """Change the password from a signed-in session; ends every session.

    Wrong current passwords count against the address's login limit, so the
    form is no side door for guessing.
    """
    user = session.user
    _count_password_attempt(conn, svc, user.email)
    if not svc.passwords.verify(user.password_hash, current):
        raise InvalidCredentials()
    ratelimit.refund(conn, "login", user.email, svc.settings.rate_limit_login, svc.clock())
    password_hash = links.new_password_hash(svc, new, user.email)
    now = svc.clock()
    with conn.transaction():
        changed = users.change_password(
            conn, user.id, session.session_id, user.password_hash, password_hash, now
        )
        if changed is None:
            raise SessionEnded()
        sessions.end_all_sessions(conn, changed.id)
        enqueue_email(
            conn, template="password_changed", recipient=changed.email, user_id=changed.id
        )
    return changed
