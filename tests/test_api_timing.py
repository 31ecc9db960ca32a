"""SPEC §5: a request for an unknown email takes about as long as one for a known email.

Prints the medians (visible with -s); it writes nothing into the source tree.
"""

from __future__ import annotations

import statistics
import time

from authsvc.accounts import actions
from tests.api_support import ApiCaller, register_shop_app
from tests.worker_support import add_users

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
    for path in ("/password-resets", "/verifications", "/sign-in-links"):
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
    assert queued == (1 + 3 * (ROUNDS + 3),)  # the known address really took the mail-sending path

    print("\n" + "\n".join(lines))


def test_a_link_request_commits_its_count_and_its_email_together(conn, svc):
    """Known or unknown, a link request is one commit.

    The count is a write, so even an unknown address's request commits and
    waits for the disk once. Had a known address's email been committed on
    its own, that request would wait for a second WAL flush, and a patient
    prober could tell accounts by it. One transaction: the count's row and
    the queued email carry the same xmin.
    """
    add_users(conn, 1, "known")
    for email in ("known1@example.com", "unknown@example.com"):
        assert actions.request_password_reset(conn, svc, email=email)
    [(job_xmin,)] = conn.execute("SELECT xmin::text FROM email_jobs").fetchall()
    counts = [row[0] for row in conn.execute(
        "SELECT xmin::text FROM rate_limit_counters WHERE bucket LIKE 'email_reset:%'"
        " ORDER BY xmin::text::bigint")]
    assert len(counts) == 2  # one per address
    assert job_xmin in counts, (job_xmin, counts)
