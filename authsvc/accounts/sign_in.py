"""Signing in by email (SPEC §13): a link and a code that sign the person in, one transaction.

The same engine as verify and reset (links.py): purpose `sign_in`, a
version per account, newest only, once, a code beside the link, its own
email budget. The request is actions.request_sign_in (the link requests'
one statement); an app registered with --sign-up-by-email gets a link for
an address with no account too, naming a placeholder account
(migrations/0031).

Redeeming proves the address, whatever else happened to it: an unproven
account is confirmed and loses the password its signups set (whoever
chose it never read this mailbox, so it must never become usable), unless
the holder chooses one now; the failed-login count is cleared and a login
lockout does not apply. The pages start a web session in the same
transaction, so two concurrent redemptions give one session.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts import links, sessions, users
from authsvc.accounts.passwords import check_policy
from authsvc.accounts.tokens import TokenClaims, TokenError
from authsvc.accounts.users import User
from authsvc.db.queries import load_queries
from authsvc.services import Services

Q = load_queries(Path(__file__).with_suffix(".sql"))


@dataclass(frozen=True)
class SignedIn:
    """A redeemed sign-in link or code."""

    user: User
    # The address was unproven until now: a confirmed account came to be
    # (the API's `created`; its apps hear user.verified).
    created: bool
    # A password set before the address was proven was thrown away.
    password_discarded: bool
    # The web session it started (the pages), else None (the API: the app keeps its own).
    session_token: str | None = None


def discards_password(user: User) -> bool:
    """Whether redeeming a sign-in link now would discard the account's password (the
    sign-in page says so and offers a new-password field)."""
    return not user.verified and user.has_password


def check_sign_in_link(conn: Connection, svc: Services, token: object) -> User:
    """The account a sign-in link would sign in as now; TokenError otherwise. Changes nothing
    (the page's GET: scanners prefetch links)."""
    return links.check_link(conn, svc, token, "sign_in")


def sign_in_with_link(
    conn: Connection, svc: Services, *, token: object, password: object = None,
    user_agent: str | None = None,
) -> SignedIn:
    """Redeem a sign-in link: once, only the newest.

    `password`: a new password, used only when the address was unproven
    (it replaces the one discarded); `user_agent`: start a web session too.
    """
    claims = svc.tokens.read(token, "sign_in")
    user = links.current_holder(conn, claims)
    password_hash = None if password is None else links.new_password_hash(svc, password, user.email)
    return _redeem(conn, svc, claims, password_hash, user_agent)


def sign_in_with_code(
    conn: Connection, svc: Services, *, email: str, code: object, password: object = None,
    user_agent: str | None = None,
) -> SignedIn:
    """Redeem the code of a sign-in email, typed with its address (SPEC §4 "Codes")."""
    if password is not None:
        check_policy(password, email)  # judged before a try is counted: it says nothing
    attempt, user = links.matching_code(conn, svc, email, "sign_in", code)
    password_hash = None if password is None else links.new_password_hash(svc, password, user.email)
    assert attempt.claims is not None
    return _redeem(conn, svc, attempt.claims, password_hash, user_agent)


def _redeem(
    conn: Connection, svc: Services, claims: TokenClaims, password_hash: str | None,
    user_agent: str | None,
) -> SignedIn:
    now = svc.clock()
    with conn.transaction():
        # The lock is the single-use guard: a concurrent redemption waits here,
        # then finds the version moved on; a signup racing it either commits
        # first (and its password is discarded here) or waits and finds the
        # address proven (register_signup then leaves the account alone).
        locked = users.lock_user(conn, claims.user_id)
        if locked is None or locked.sign_in_version != claims.version:
            raise links.stale_link_error(conn, claims, locked)
        first_proof = not locked.verified
        redeemed = users.user_from(conn, Q["redeem_sign_in"], {
            "user_id": locked.id, "version": claims.version,
            "password_hash": password_hash, "now": now,
        })
        assert redeemed is not None  # under the lock, the version was current
        users.record_redemption(conn, redeemed.id, "sign_in", claims.version, now)
        if first_proof:
            links.address_proven(conn, redeemed)
            links.flow_completed(conn, redeemed, "sign_in", claims.version, "user.verified", now,
                                 first_proof=True)
        else:
            # Signing in by email is how a person locked out by someone
            # else's guesses gets back in: their count goes.
            ratelimit.clear(conn, "login", redeemed.email)
        session_token = None
        if user_agent is not None:
            session_token = sessions.start_session(conn, redeemed, user_agent, now,
                                                   started_by="sign_in")
            assert session_token is not None  # proven, and its hash read under the lock
        return SignedIn(redeemed, first_proof, first_proof and locked.has_password,
                        session_token)


def use_sign_in_code(conn: Connection, svc: Services, *, email: str, code: object) -> User | None:
    """Use up a current sign-in code of a confirmed account with no password, as the proof
    that lets it change its address or delete itself (SPEC §12); None if it is no such code.

    Counted like any typed code (five tries, the address's hour). The code
    is redeemed (once, newest only) in the caller's transaction, and signs
    nobody in.
    """
    try:
        attempt, _user = links.matching_code(conn, svc, email, "sign_in", code)
    except TokenError:
        return None
    assert attempt.claims is not None
    now = svc.clock()
    with conn.transaction():
        user = users.user_from(conn, Q["use_sign_in_code"], {
            "user_id": attempt.claims.user_id, "version": attempt.claims.version,
        })
        if user is not None:
            users.record_redemption(conn, user.id, "sign_in", attempt.claims.version, now)
    return user
