"""How long one argon2id hash and verify take with the production parameters.

Run: .venv/bin/python bench/password_hashing.py
Writes bench/results/password_hashing.txt.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from authsvc.accounts.passwords import MEMORY_COST_KIB, PARALLELISM, TIME_COST, Passwords

ROUNDS = 30


def _median_ms(action) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    passwords = Passwords()
    stored = passwords.hash("correct horse battery staple")
    hash_ms = _median_ms(lambda: passwords.hash("correct horse battery staple"))
    verify_ms = _median_ms(lambda: passwords.verify(stored, "correct horse battery staple"))
    report = (
        f"argon2id m={MEMORY_COST_KIB} KiB t={TIME_COST} p={PARALLELISM}: "
        f"hash median {hash_ms:.1f} ms, verify median {verify_ms:.1f} ms over {ROUNDS} runs"
    )
    print(report)
    out = Path(__file__).parent / "results" / "password_hashing.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(report + "\n")


if __name__ == "__main__":
    main()
