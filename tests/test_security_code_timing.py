"""A wrong code for a known address and any code for an unknown one: same bytes, same work.

Both run one statement (that counts a try for the address either way) and one
HMAC per secret key, and raise the same error; the test checks the answers
byte for byte every round and prints the medians (-s) rather than asserting
on times (they live with the machine's load).
"""

from __future__ import annotations

import statistics
import time

from authsvc.accounts import actions
from authsvc.apps.keys import register_app
from authsvc.config import load_settings
from authsvc.web.app import create_app
from tests.link_support import latest_code

ROUNDS = 41


def test_unknown_address_and_wrong_code_cost_the_same(env, pool, clock, conn, svc, passwords):
    # Two keys, as during a rotation: each check then runs two HMACs on both paths.
    settings = load_settings(env, AUTHSVC_RATE_LIMIT_APP="100000/1d",
                             AUTHSVC_SECRET_KEYS=f"{'r' * 40},{env['AUTHSVC_SECRET_KEYS']}")
    client = create_app(settings, pool=pool, clock=clock, passwords=passwords).test_client()
    _app, key = register_app(conn, "timing", ["https://allowed.example.com/"])
    headers = {"Authorization": f"Bearer {key}"}
    known = [f"known{i}@example.com" for i in range(ROUNDS + 1)]
    for email in known:
        actions.sign_up(conn, svc, email=email, password="correct horse battery")
    wrong = {email: f"{(int(latest_code(conn, svc, email, 'verify')) + 1) % 10**6:06d}"
             for email in known}

    def confirm(email: str, code: str) -> tuple[float, bytes]:
        start = time.perf_counter()
        response = client.post("/api/v1/verifications/confirm",
                               json={"email": email, "code": code}, headers=headers)
        elapsed = (time.perf_counter() - start) * 1000
        assert response.status_code == 400
        return elapsed, response.get_data()

    confirm(known[-1], wrong[known[-1]])  # warm up both paths
    confirm("warmup@example.com", "123456")
    known_ms: list[float] = []
    unknown_ms: list[float] = []
    for i in range(ROUNDS):
        # Interleaved, first one then the other, so drift in load hits both alike.
        known_call = (known[i], wrong[known[i]])
        unknown_call = (f"nobody{i}@example.com", wrong[known[i]])
        if i % 2:
            t_unknown, body_unknown = confirm(*unknown_call)
            t_known, body_known = confirm(*known_call)
        else:
            t_known, body_known = confirm(*known_call)
            t_unknown, body_unknown = confirm(*unknown_call)
        assert body_known == body_unknown
        known_ms.append(t_known)
        unknown_ms.append(t_unknown)
    k, u = statistics.median(known_ms), statistics.median(unknown_ms)
    spread = statistics.median(abs(a - b) for a, b in zip(known_ms, unknown_ms, strict=True))
    print(f"\ncode confirm, wrong code for a known address: median {k:.2f} ms;"
          f" unknown address: median {u:.2f} ms; difference {k - u:+.2f} ms;"
          f" median per-round |difference| {spread:.2f} ms ({ROUNDS} rounds)")
