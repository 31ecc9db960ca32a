"""Known and unknown addresses cost the same at login and signup, with production hashing.

A password hash is the one step slow enough to time from outside (tens of
ms), so each pair of paths must spend the same number of hashes. The test
fails if either path skips or adds one; the medians are printed (-s).
"""

from __future__ import annotations

import statistics
import time

import pytest

from authsvc.accounts.passwords import Passwords
from authsvc.apps.keys import register_app
from authsvc.config import load_settings
from authsvc.web.app import create_app

ROUNDS = 21
KNOWN = "known@example.com"
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def production_passwords() -> Passwords:
    return Passwords()


def _medians_ms(*calls, rounds: int = ROUNDS) -> list[float]:
    """Median of each call, interleaved so drift in machine load hits all alike."""
    timings: list[list[float]] = [[] for _ in calls]
    for i in range(rounds):
        for call, times in zip(calls, timings, strict=True):
            start = time.perf_counter()
            call(i)
            times.append((time.perf_counter() - start) * 1000)
    return [statistics.median(times) for times in timings]


@pytest.mark.timeout(180)
def test_unknown_addresses_cost_one_hash_like_known_ones(env, pool, clock, conn,
                                                          production_passwords) -> None:
    settings = load_settings(env, AUTHSVC_RATE_LIMIT_LOGIN="100000/1d",
                             AUTHSVC_RATE_LIMIT_APP="100000/1d",
                             AUTHSVC_RATE_LIMIT_EMAIL="100000/1d")
    client = create_app(settings, pool=pool, clock=clock,
                        passwords=production_passwords).test_client()
    _app, key = register_app(conn, "timing", ["https://allowed.example.com/"])
    headers = {"Authorization": f"Bearer {key}"}

    def post(path: str, body: dict, expected: int) -> None:
        response = client.post(path, json=body, headers=headers)
        assert response.status_code == expected, response.get_data(as_text=True)

    post("/api/v1/signups", {"email": KNOWN, "password": PASSWORD}, 202)

    def one_hash(_i: int) -> None:
        production_passwords.hash(PASSWORD)

    pairs = {
        "login, wrong password": (
            lambda _i: post("/api/v1/sessions", {"email": KNOWN, "password": "wrong guess!"}, 401),
            lambda i: post("/api/v1/sessions", {"email": f"nobody{i}@example.com",
                                                "password": "wrong guess!"}, 401),
        ),
        "signup": (
            lambda _i: post("/api/v1/signups", {"email": KNOWN, "password": PASSWORD}, 202),
            lambda i: post("/api/v1/signups", {"email": f"new{i}@example.com",
                                               "password": PASSWORD}, 202),
        ),
    }
    lines = []
    for name, (known_call, unknown_call) in pairs.items():
        known_call(-1)  # warm up both paths
        unknown_call(-1)
        known, unknown, hashing = _medians_ms(known_call, unknown_call, one_hash)
        lines.append(f"{name}: known {known:.1f} ms, unknown {unknown:.1f} ms,"
                     f" one argon2id hash {hashing:.1f} ms (medians of {ROUNDS})")
        # A skipped or extra hash would open a gap of about one hash.
        assert abs(known - unknown) < 0.5 * hashing, "\n".join(lines)
    print("\n" + "\n".join(lines))
