"""How long the console's code step takes for a wrong code after a right and after a
wrong password: the step must not tell a guesser which password was right.

Run: .venv/bin/python -m bench.console_code_timing [--rounds 200]
Point AUTHSVC_BENCH_DATABASE_URL at a server that waits for its WAL flush
(PostgreSQL's default) to see what a commit costs there; without it the
throwaway server is used. Prints both medians over interleaved rounds
(tests/test_console_code_timing.py checks that both paths make one commit).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import psycopg

from authsvc.accounts import actions
from authsvc.accounts.passwords import Passwords
from authsvc.config import load_settings
from authsvc.db.connections import create_pool
from authsvc.operators import access, roles
from authsvc.services import Services, build_services
from bench.common import fresh_database

OPERATOR = "operator@example.com"
PASSWORD = "a long operator passphrase"
WRONG_CODE = "000000"


def _operator(conn: psycopg.Connection, svc: Services) -> None:
    actions.sign_up(conn, svc, email=OPERATOR, password=PASSWORD)
    row = conn.execute("SELECT id FROM users WHERE email = %s", (OPERATOR,)).fetchone()
    assert row is not None
    user_id = int(row[0])
    conn.execute("UPDATE users SET email_verified_at = now() WHERE id = %s", (user_id,))
    assert roles.add_operator(conn, user_id, svc.clock())


def _wrong_code_ms(conn: psycopg.Connection, svc: Services, token: str) -> float | None:
    """The step's time, or None in the one-in-a-million case that WRONG_CODE was right."""
    start = time.perf_counter()
    try:
        access.check_code(conn, svc, sign_in_token=token, code=WRONG_CODE, ip="10.7.0.1",
                          user_agent="bench")
    except access.WrongCode:
        return (time.perf_counter() - start) * 1000
    return None


def measure(url: str, rounds: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="authsvc-bench-") as data:
        settings = load_settings({
            "AUTHSVC_ENV": "test", "AUTHSVC_DATABASE_URL": url, "AUTHSVC_DATA_DIR": data,
            "AUTHSVC_SECRET_KEYS": "bench-secret-key-0123456789abcdef-0123456789",
            "AUTHSVC_RATE_LIMIT_LOGIN": "1000000/1d"})
        pool = create_pool(url, min_size=1, max_size=1, check=False)
        try:
            svc = build_services(settings, pool, passwords=Passwords())
            after_right: list[float] = []
            after_wrong: list[float] = []
            with psycopg.connect(url, autocommit=True) as conn:
                _operator(conn, svc)
                for number in range(rounds + 1):
                    right = access.check_password(conn, svc, email=OPERATOR, password=PASSWORD,
                                                  ip="10.7.1.1")
                    wrong = access.check_password(conn, svc, email=OPERATOR, password="no",
                                                  ip="10.7.1.1")
                    calls = [(after_right, right), (after_wrong, wrong)]
                    # Alternate which goes first, so drift in load hits both alike.
                    for times, token in calls if number % 2 else reversed(calls):
                        took = _wrong_code_ms(conn, svc, token)
                        if took is not None and number > 0:  # round 0 warms both paths
                            times.append(took)
            return after_right, after_wrong
        finally:
            pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.console_code_timing")
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    with fresh_database() as url:
        after_right, after_wrong = measure(url, rounds)
    r, w = statistics.median(after_right), statistics.median(after_wrong)
    print(f"console code step, a wrong code, median of {rounds} interleaved rounds:"
          f" after the right password {r:.3f} ms, after a wrong one {w:.3f} ms,"
          f" difference {r - w:+.3f} ms")


if __name__ == "__main__":
    main()
