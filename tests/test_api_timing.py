"""SPEC §5: a request for an unknown email takes about as long as one for a known email.

Prints the medians (visible with -s); it writes nothing into the source tree.
"""

from __future__ import annotations

import statistics
import time

from tests.api_support import ApiCaller, register_shop_app

ROUNDS = 50


def _timed_ms(api: ApiCaller, path: str, email: str) -> list[float]:
    start = time.perf_counter()
    response = api.post(path, {"email": email})
    elapsed = (time.perf_counter() - start) * 1000
    assert response.status_code == 202
    return [elapsed]


def test_known_and_unknown_emails_take_about_as_long(app_with, conn):
    # Lift the per-address limit: over it the known address would stop queueing
    # mail, and the two paths would look alike for the wrong reason.
    client = app_with(
        AUTHSVC_RATE_LIMIT_EMAIL="100000/1m", AUTHSVC_RATE_LIMIT_APP="100000/1m"
    ).test_client()
    api = ApiCaller(client, *register_shop_app(conn))
    api.sign_up("known@example.com")

    lines = []
    for path in ("/password-resets", "/verifications"):
        timings: dict[str, list[float]] = {"known": [], "unknown": []}
        for _ in range(3):  # warm up both paths (prepared statements, caches)
            _timed_ms(api, path, "known@example.com")
            _timed_ms(api, path, "unknown@example.com")
        for i in range(ROUNDS):
            # Interleaved, so drift in machine load hits both alike.
            timings["known"] += _timed_ms(api, path, "known@example.com")
            timings["unknown"] += _timed_ms(api, path, f"unknown{i}@example.com")
        known, unknown = (statistics.median(timings[k]) for k in ("known", "unknown"))
        lines.append(
            f"POST /api/v1{path}: median over {ROUNDS} requests:"
            f" known {known:.2f} ms, unknown {unknown:.2f} ms"
        )
        # Generous: the known path writes a version bump and an outbox row, a
        # fraction of a millisecond; a gap the size of a password hash would fail.
        assert abs(known - unknown) < max(5.0, 0.5 * max(known, unknown)), lines[-1]
    queued = conn.execute(
        "SELECT count(*) FROM email_jobs WHERE recipient = 'known@example.com'"
    ).fetchone()
    assert queued == (1 + 2 * (ROUNDS + 3),)  # the known address really took the mail-sending path

    print("\n" + "\n".join(lines))
