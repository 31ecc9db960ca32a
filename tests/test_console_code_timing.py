"""The console's code step costs the same whether the password before it was right.

A wrong password gets a sign-in token that names nothing, a right one a token
with a sign-in row behind it; a wrong code after either must not take
measurably longer, or the code step tells a guesser which password was right.
In production a commit that wrote waits for its WAL flush (milliseconds), so
the two paths must make the same number of writing commits: this counts them
(transaction ids taken). The times themselves are a benchmark's, not a test's:
`python -m bench.console_code_timing`.
"""

from __future__ import annotations

import psycopg
import pytest

from authsvc.config import load_settings
from authsvc.operators import CONSOLE_CODE_TTL, access
from authsvc.services import build_services
from tests.accounts_support import one_number
from tests.console_support import OPERATOR, emailed_code, make_operator
from tests.pages_support import PASSWORD


def _services(settings_env, pool, clock, passwords):  # type: ignore[no-untyped-def]
    settings = load_settings(settings_env, AUTHSVC_RATE_LIMIT_LOGIN="100000/1d")
    return build_services(settings, pool, clock=clock, passwords=passwords)


def _tokens(conn: psycopg.Connection, svc, ip: str) -> tuple[str, str, str]:  # type: ignore[no-untyped-def]
    """A sign-in token after the right password, one after a wrong one, and a wrong code."""
    right = access.check_password(conn, svc, email=OPERATOR, password=PASSWORD, ip=ip)
    wrong = access.check_password(conn, svc, email=OPERATOR, password="not the password", ip=ip)
    code = f"{(int(emailed_code(conn, svc)) + 1) % 1_000_000:06d}"
    return right, wrong, code


def _wrong_code(conn: psycopg.Connection, svc, token: str, code: str) -> None:  # type: ignore[no-untyped-def]
    try:
        access.check_code(conn, svc, sign_in_token=token, code=code, ip="10.7.0.1",
                          user_agent="timing")
    except access.WrongCode:
        return
    raise AssertionError("a wrong code signed in")


def _xids_taken(conn: psycopg.Connection, svc, token: str, code: str) -> int:  # type: ignore[no-untyped-def]
    """Transaction ids the server handed out during a wrong code: one per commit that
    wrote (each bracket takes one itself)."""
    before = one_number(conn, "SELECT pg_current_xact_id()::text::bigint")
    _wrong_code(conn, svc, token, code)
    return one_number(conn, "SELECT pg_current_xact_id()::text::bigint") - before - 1


def _fewest_xids(conn: psycopg.Connection, svc, clock, case: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The fewest ids the measured wrong code took after the right and after a wrong
    password, over fresh sign-ins, for one case: the first wrong code, the fifth (the
    last try), one after the tries ran out, or a code after its lifetime. Ids are the
    whole server's, so another test's commits can only add: it tries until both reach
    their least, or 40 times."""
    fewest = {"right": 99, "wrong": 99}
    for i in range(40):
        right, wrong, code = _tokens(conn, svc, f"10.7.1.{i}")
        if case in ("fifth", "sixth"):
            for token in (right, wrong):
                for _ in range(4 if case == "fifth" else 5):
                    _wrong_code(conn, svc, token, code)
        if case == "expired":
            clock.advance(CONSOLE_CODE_TTL)
        for name, token in (("right", right), ("wrong", wrong)):
            fewest[name] = min(fewest[name], _xids_taken(conn, svc, token, code))
        if fewest == {"right": 1, "wrong": 1}:
            break
    return fewest


@pytest.mark.parametrize("case", ["first", "fifth", "sixth", "expired"])
def test_a_wrong_code_makes_the_same_writing_commits_after_a_right_or_wrong_password(
        env, pool, clock, conn, passwords, case):
    """One writing commit (the IP's count, with the try when there is one) whether the
    password was right or not, whichever try the code is and even after the lifetime."""
    svc = _services(env, pool, clock, passwords)
    make_operator(conn, svc)
    assert _fewest_xids(conn, svc, clock, case) == {"right": 1, "wrong": 1}
