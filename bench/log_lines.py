"""Where a worker log line's time goes: logging's record, the formatter, the encoder, the write.

Run: .venv/bin/python -m bench.log_lines   (a few seconds; writes bench/results/log_lines.txt)

Each figure is microseconds per line, best of five rounds of 20,000 lines
of the worker's shape (SPEC §7's fields), written to a file as a deployed
worker's stderr would be.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from authsvc.observability.logs import JsonFormatter, JsonLinesHandler, log_event, log_events
from bench.common import RESULTS

LINES = 20_000
ROUNDS = 5
BATCH = 100  # the worker's default claim batch
EXPIRES = datetime.now(UTC)


def _fields(i: int) -> dict[str, object]:
    return {"job_id": i, "lease_owner": "host:4242:9f3ab2c1", "lease_expires_at": EXPIRES,
            "attempt": 1, "token_version": 3, "provider_message_id": None, "error": None}


def _per_line(step: Callable[[int], object], per_step: int = 1) -> float:
    """µs per line of `step(i)` for i in 0, per_step, 2 * per_step, … below LINES."""
    best = float("inf")
    for _ in range(ROUNDS):
        began = time.perf_counter()
        for i in range(0, LINES, per_step):
            step(i)
        best = min(best, time.perf_counter() - began)
    return best / LINES * 1e6


def measure() -> dict[str, float]:
    logger = logging.getLogger("authsvc.worker.jobs")
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    formatter = JsonFormatter()
    with tempfile.TemporaryFile("w") as out:
        handler = JsonLinesHandler(out)
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)
        try:
            records = [logger.makeRecord(logger.name, logging.INFO, "(unknown file)", 0,
                                         "claimed", (), None, extra=_fields(i))
                       for i in range(LINES)]
            figures = {
                "record (makeRecord)": _per_line(lambda i: logger.makeRecord(
                    logger.name, logging.INFO, "(unknown file)", 0, "claimed", (), None,
                    extra=_fields(i))),
                "formatter (JsonFormatter.format)": _per_line(
                    lambda i: formatter.format(records[i])),
                "write + flush, a line at a time": _per_line(
                    lambda _i: handler.write_lines('{"x":1}\n')),
                "log_event: the whole line through logging": _per_line(
                    lambda i: log_event(logger, "claimed", logging.INFO, **_fields(i))),
                f"log_events: batches of {BATCH}": _per_line(lambda i: log_events(
                    logger, [("claimed", logging.INFO, _fields(j)) for j in range(i, i + BATCH)]),
                    BATCH),
            }
        finally:
            root.handlers[:], level = saved
            root.setLevel(level)
    return figures


def main() -> None:
    figures = measure()
    text = "\n".join(f"{name:45s} {value:6.1f} µs/line" for name, value in figures.items())
    print(text)
    Path(RESULTS, "log_lines.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
