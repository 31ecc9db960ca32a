"""Signing in to the console: the password, then a one-time code by email, then a session.

Apart from user logins on purpose (SPEC §15): failures count per IP in their
own bucket (`console`), so the user login limit, which anyone can fill for
an address, cannot lock an operator out, and a guesser at /admin/login is
held back wherever the address is. An operator who set up TOTP types their
authenticator's code instead, and gets no email. Console sessions are their own table:
a user's session never opens the console. The code is minted by the worker
from (operator, console_login, version, issued_at) and never stored; the
password step and a used code each move the operator's version on, so only
the newest code works, and only once.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts import links, users
from authsvc.accounts.actions import TooManyAttempts
from authsvc.accounts.sessions import token_hash
from authsvc.accounts.tokens import TokenClaims, is_code_shaped
from authsvc.db.queries import load_queries
from authsvc.operators import CONSOLE_CODE_TTL, totp
from authsvc.operators.log import Actor, write_entry
from authsvc.outbox import enqueue_email
from authsvc.services import Services

Q = load_queries(Path(__file__).with_suffix(".sql"))
PURPOSE = "console_login"
IDLE_LIFETIME = timedelta(minutes=30)
TOTAL_LIFETIME = timedelta(hours=8)
# Codes one sign-in may have checked before it must start again from the password.
MAX_TRIES = 5
RATE_KIND = "console"
MAX_USER_AGENT = 300


class InvalidCredentials(Exception):
    """Wrong address or password, or not an operator (never leaves this module)."""


class WrongCode(Exception):
    """Not a code that opens anything: wrong, or its sign-in ended or never was."""


@dataclass(frozen=True)
class ConsoleSession:
    session_id: int
    user_id: int
    email: str


def _count_attempt(conn: Connection, svc: Services, ip: str) -> None:
    # Counted before checking, like user logins: concurrent guesses cannot all
    # pass while argon2 runs.
    decision = ratelimit.hit(conn, RATE_KIND, ip, svc.settings.rate_limit_login, svc.clock())
    if not decision.allowed:
        raise TooManyAttempts(decision.retry_after)


def _refund(conn: Connection, svc: Services, ip: str) -> None:
    ratelimit.refund(conn, RATE_KIND, ip, svc.settings.rate_limit_login, svc.clock())


def check_password(conn: Connection, svc: Services, *, email: str, password: str, ip: str) -> str:
    """The password step; returns a sign-in token whatever the password was.

    Only an operator's right password records the sign-in and queues a code
    (or expects their authenticator's); every other case (unknown address,
    wrong password, unproven address, not an operator) returns a token that
    names nothing, after the same argon2 work. Both go on to the code page,
    so the step tells nobody whether a password was right: guessing an
    operator's password here from many addresses, past the per-address login
    limit that /login applies, learns nothing. A failure still counts against
    that address's login limit, as a wrong password at /login would.
    """
    # Every try counts against the IP, a right password's too: were a right one given
    # back, the limit's 429 would say which of the last guesses was right.
    _count_attempt(conn, svc, ip)
    token = secrets.token_urlsafe(32)
    try:
        _record_sign_in(conn, svc, email=email, password=password, token=token)
    except InvalidCredentials:
        ratelimit.hit(conn, "login", email, svc.settings.rate_limit_login, svc.clock())
    return token


def _record_sign_in(
    conn: Connection, svc: Services, *, email: str, password: str, token: str
) -> None:
    user = users.find_user_by_email(conn, email)
    matches = svc.passwords.verify(user.password_hash if user else None, password)
    opened = user is not None and matches and user.verified
    now = svc.clock()
    issued = links.issued_at(now)
    # The same statements and commit whether or not the password opened an account
    # (user id 0 matches no operator): the step's time says nothing either.
    with conn.transaction():
        user_id = user.id if opened and user is not None else 0
        row = conn.execute(Q["issue_code"], {"user_id": user_id, "token_hash": token_hash(token),
                                             "issued_at": issued}).fetchone()
        if row is None or user is None:  # not an operator (user id 0 is none)
            raise InvalidCredentials()
        # With TOTP set up, the authenticator gives the code: no email. The
        # version still moves on, so any emailed code still unused dies.
        if row[1]:
            enqueue_email(conn, template="console_code", recipient=user.email, user_id=user.id,
                          purpose=PURPOSE, token_version=int(row[0]), issued_at=issued)


def check_code(
    conn: Connection, svc: Services, *, sign_in_token: str, code: str, ip: str, user_agent: str
) -> str:
    """The code step: the right code, once, within its lifetime, starts a console session.

    Returns the session's token (the cookie's). Every failure is WrongCode,
    one answer: a sign-in that never was (a wrong password), one that ended
    (used, expired, replaced, five wrong codes) and a wrong code look alike.
    """
    hashed = token_hash(sign_in_token)
    now = svc.clock()
    # The IP's count and the sign-in's try commit together: the count writes on every
    # path, so a try that also writes (there is a sign-in only after a right password)
    # adds no commit, and no WAL flush that would time which passwords were right. For
    # the same reason nothing else here writes before the code is known right: a
    # sign-in out of tries or past its lifetime is refused by take_try and left for
    # the next password step to replace (one row per operator at most), and codes sent
    # together queue alike on either path (access.sql queue_tries).
    # A refused attempt rolls back and takes no try.
    with conn.transaction():
        _count_attempt(conn, svc, ip)
        conn.execute(Q["queue_tries"], {"token_hash": hashed})
        row = conn.execute(Q["take_try"], {
            "token_hash": hashed, "max_tries": MAX_TRIES,
            "issued_after": now - timedelta(seconds=CONSOLE_CODE_TTL)}).fetchone()
    if row is None:
        raise WrongCode()
    user_id, version, issued_at = int(row[0]), int(row[1]), row[2]
    typed = "".join(code.split())
    sealed_totp, last_step = row[5], int(row[6])
    totp_step = None
    if sealed_totp is not None:
        secret = totp.open_sealed(svc.settings.secret_keys, user_id, sealed_totp)
        totp_step = totp.matching_step(secret, typed, now) if is_code_shaped(typed) else None
        right = totp_step is not None and totp_step > last_step
    else:
        claims = TokenClaims(user_id, PURPOSE, version, issued_at)
        right = is_code_shaped(typed) and svc.tokens.code_matches(claims, typed)
    if not right:
        raise WrongCode()
    session_token = secrets.token_urlsafe(32)
    with conn.transaction():
        conn.execute(Q["drop_sign_in"], {"token_hash": hashed})
        used = conn.execute(Q["use_code"], {"user_id": user_id, "code_version": version,
                                            "totp_step": totp_step}).fetchone()
        if used is None:  # used or replaced since it was read
            raise WrongCode()
        conn.execute(Q["prune_console_sessions"], _lifetimes(now))
        conn.execute(Q["start_console_session"], {
            "token_hash": token_hash(session_token), "user_id": user_id, "now": now,
            "user_agent": user_agent[:MAX_USER_AGENT]})
        write_entry(conn, Actor(user_id, str(row[4])), "console.sign_in",
                    f"account {user_id}", now)
    _refund(conn, svc, ip)
    return session_token


def _lifetimes(now: datetime) -> dict[str, datetime]:
    return {"started_before": now - TOTAL_LIFETIME, "idle_before": now - IDLE_LIFETIME}


def find_console_session(conn: Connection, token: str, now: datetime) -> ConsoleSession | None:
    """The live console session for this token, seen now; None when ended, idle or too old."""
    row = conn.execute(Q["touch_console_session"],
                       {"token_hash": token_hash(token), "now": now, **_lifetimes(now)}).fetchone()
    return ConsoleSession(int(row[0]), int(row[1]), str(row[2])) if row else None


def end_console_session(conn: Connection, token: str) -> None:
    conn.execute(Q["end_console_session"], {"token_hash": token_hash(token)})
