"""Account use cases: one function per user action, one transaction each.

Each function takes a connection from the caller (so the JSON API can put
its idempotency record in the same transaction) and opens its own
`conn.transaction()` block, which nests as a savepoint when the caller
already has one. Email is only ever queued here, never sent.
"""

from __future__ import annotations

from datetime import datetime

from psycopg import Connection

from authsvc import ratelimit, users
from authsvc.outbox import enqueue_email, enqueue_link
from authsvc.passwords import check_policy
from authsvc.services import Services
from authsvc.tokens import TokenClaims, TokenError
from authsvc.users import User


class InvalidCredentials(Exception):
    pass


class TooManyAttempts(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__(retry_after)
        self.retry_after = retry_after


class SessionEnded(Exception):
    """The session's version is stale: the password changed elsewhere."""


def _email_allowed(conn: Connection, svc: Services, email: str, now: datetime) -> bool:
    # Counted for known and unknown addresses alike, so the limit reveals nothing.
    return ratelimit.hit(conn, "email", email, svc.settings.rate_limit_email, now).allowed


def _issue_link(
    conn: Connection, email: str, purpose: str, redirect_url: str | None, now: datetime
) -> None:
    """Retire the address's older links of this purpose and queue the new one."""
    enqueue_link(
        conn,
        email=email,
        purpose=purpose,
        # Whole seconds: the token carries issued_at as an integer timestamp.
        issued_at=now.replace(microsecond=0),
        payload={"redirect_url": redirect_url} if redirect_url else {},
    )


def sign_up(
    conn: Connection, svc: Services, *, email: str, password: str, redirect_url: str | None = None
) -> None:
    """Create an account and queue its verification email.

    A taken address answers the same way; its owner gets "account exists"
    if the address is verified, else a fresh verification link.
    """
    check_policy(password, email)
    # Hash before looking the address up: both branches cost one argon2 hash.
    password_hash = svc.passwords.hash(password)
    now = svc.clock()
    with conn.transaction():
        user = users.insert_user(conn, email, password_hash)
        if user is None:
            # Nobody has proven this address yet: the newest signup's password
            # wins and earlier sessions end, so whoever registered it first
            # (perhaps not its owner) keeps no access (pre-account hijacking).
            user = users.claim_unverified_account(conn, email, password_hash)
        if not _email_allowed(conn, svc, email, now):
            return
        if user is not None:
            _issue_link(conn, email, "verify", redirect_url, now)
            return
        existing = users.find_user_by_email(conn, email)
        assert existing is not None
        enqueue_email(conn, template="account_exists", recipient=email, user_id=existing.id)


def request_verification(
    conn: Connection, svc: Services, *, email: str, redirect_url: str | None = None
) -> None:
    """Queue a fresh verification link for an unverified account; silent otherwise."""
    now = svc.clock()
    with conn.transaction():
        # Known or not, the same statements run (see outbox.sql queue_link).
        if _email_allowed(conn, svc, email, now):
            _issue_link(conn, email, "verify", redirect_url, now)


def request_password_reset(
    conn: Connection, svc: Services, *, email: str, redirect_url: str | None = None
) -> None:
    """Queue a reset link if the account exists; silent otherwise."""
    now = svc.clock()
    with conn.transaction():
        if _email_allowed(conn, svc, email, now):
            _issue_link(conn, email, "reset", redirect_url, now)


def _stale_link_error(conn: Connection, claims: TokenClaims) -> TokenError:
    """Why a validly signed link no longer redeems."""
    user = users.find_user_by_id(conn, claims.user_id)
    if user is None or claims.version > user.version(claims.purpose):
        return TokenError("invalid_token")  # not a link this database issued
    if users.was_redeemed(conn, claims.user_id, claims.purpose, claims.version):
        return TokenError("token_used")
    return TokenError("token_superseded")


def _current_holder(conn: Connection, claims: TokenClaims) -> User:
    """The account whose current link these claims describe; TokenError otherwise."""
    user = users.find_user_by_id(conn, claims.user_id)
    if user is None or user.version(claims.purpose) != claims.version:
        raise _stale_link_error(conn, claims)
    return user


def check_link(conn: Connection, svc: Services, token: object, purpose: str) -> User:
    """The link's account if it would redeem now; TokenError otherwise. Changes nothing."""
    return _current_holder(conn, svc.tokens.read(token, purpose))


def confirm_verification(conn: Connection, svc: Services, *, token: object) -> User:
    """Redeem a verification link: exactly once, and only the newest."""
    claims = svc.tokens.read(token, "verify")
    now = svc.clock()
    with conn.transaction():
        # The conditional UPDATE is the single-use guard: a concurrent redeemer
        # waits on the row lock, then re-checks the version and matches nothing.
        user = users.redeem_verify_link(conn, claims.user_id, claims.version, now)
        if user is None:
            raise _stale_link_error(conn, claims)
        users.record_redemption(conn, user.id, "verify", claims.version, now)
    return user


def reset_password(conn: Connection, svc: Services, *, token: object, password: object) -> User:
    """Redeem a reset link: set the password, end sessions, queue the notice."""
    claims = svc.tokens.read(token, "reset")
    # Reject a stale link before judging the password: "use the newest email"
    # is the more useful answer.
    current = _current_holder(conn, claims)
    check_policy(password, current.email)
    assert isinstance(password, str)
    password_hash = svc.passwords.hash(password)
    now = svc.clock()
    with conn.transaction():
        user = users.redeem_reset_link(conn, claims.user_id, claims.version, password_hash, now)
        if user is None:  # lost a race with another redemption or a newer link
            raise _stale_link_error(conn, claims)
        users.record_redemption(conn, user.id, "reset", claims.version, now)
        enqueue_email(conn, template="password_changed", recipient=user.email, user_id=user.id)
    return user


def authenticate(conn: Connection, svc: Services, *, email: str, password: str) -> User:
    """The account for these credentials; failures are counted per address."""
    now = svc.clock()
    limit = svc.settings.rate_limit_login
    # Count the attempt before checking it: with read-then-count, concurrent
    # guesses would all pass while argon2 runs. A success gives its count back.
    decision = ratelimit.hit(conn, "login", email, limit, now)
    if not decision.allowed:
        raise TooManyAttempts(decision.retry_after)
    user = users.find_user_by_email(conn, email)
    # An unknown address still pays for one verification (timing).
    if not svc.passwords.verify(user.password_hash if user else None, password) or user is None:
        raise InvalidCredentials()
    ratelimit.refund(conn, "login", email, limit, now)
    if svc.passwords.needs_rehash(user.password_hash):
        # Only over the hash we verified: a reset committed meanwhile must win.
        users.update_password_hash(conn, user.id, user.password_hash, svc.passwords.hash(password))
    return user


def change_password(
    conn: Connection,
    svc: Services,
    *,
    user_id: int,
    session_version: int,
    current: str,
    new: object,
) -> User:
    """Change the password from a signed-in session; ends every session."""
    user = users.find_user_by_id(conn, user_id)
    if user is None or user.session_version != session_version:
        raise SessionEnded()
    if not svc.passwords.verify(user.password_hash, current):
        raise InvalidCredentials()
    check_policy(new, user.email)
    assert isinstance(new, str)
    now = svc.clock()
    with conn.transaction():
        changed = users.change_password(
            conn, user.id, session_version, svc.passwords.hash(new), now
        )
        if changed is None:
            raise SessionEnded()
        enqueue_email(
            conn, template="password_changed", recipient=changed.email, user_id=changed.id
        )
    return changed


def current_session_user(conn: Connection, user_id: int, session_version: int) -> User | None:
    """The signed-in account, or None when its sessions were ended."""
    user = users.find_user_by_id(conn, user_id)
    if user is None or user.session_version != session_version:
        return None
    return user
