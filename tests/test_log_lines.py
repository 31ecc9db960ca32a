"""The worker's batched log lines are the lines logging would write, and reach every handler."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from authsvc.observability.logs import JsonLinesHandler, log_event, log_events

EXPIRES = datetime(2026, 12, 7, 8, 0, 1, 250000, tzinfo=UTC)
FIELDS = {"job_id": 7, "lease_owner": "host:12:ab", "lease_expires_at": EXPIRES, "attempt": 2,
          "token_version": 3, "provider_message_id": None, "error": "451 try \u201clater\u201d"}


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """The root logger as configure_logging leaves it, writing to a string."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    out = io.StringIO()
    root.handlers[:] = [JsonLinesHandler(out)]
    root.setLevel(logging.INFO)
    try:
        yield out
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def _lines(text: str) -> list[dict]:
    lines = [json.loads(line) for line in text.splitlines()]
    for line in lines:
        assert line.pop("ts").startswith("20")
    return lines


def test_a_batch_writes_the_lines_log_event_writes(stream: io.StringIO) -> None:
    logger = logging.getLogger("authsvc.worker.jobs")
    log_event(logger, "retry", logging.WARNING, **FIELDS)
    one_by_one = _lines(stream.getvalue())
    stream.seek(0)
    stream.truncate()
    log_events(logger, [("retry", logging.WARNING, FIELDS)])
    batched = _lines(stream.getvalue())
    assert batched == one_by_one == [{
        "level": "warning", "logger": "authsvc.worker.jobs", "event": "retry",
        "message": "retry", "job_id": 7, "lease_owner": "host:12:ab",
        "lease_expires_at": "2026-12-07 08:00:01.250000+00:00", "attempt": 2,
        "token_version": 3, "provider_message_id": None, "error": "451 try \u201clater\u201d"}]


def test_a_batch_keeps_its_order_and_drops_what_the_level_drops(stream: io.StringIO) -> None:
    logger = logging.getLogger("authsvc.worker.jobs")
    log_events(logger, [("claimed", logging.DEBUG, FIELDS), ("claimed", logging.INFO, FIELDS),
                        ("failed", logging.WARNING, {**FIELDS, "job_id": 8})])
    assert [(line["event"], line["job_id"]) for line in _lines(stream.getvalue())] == [
        ("claimed", 7), ("failed", 8)]
    assert stream.getvalue().endswith("}\n")


def test_any_other_handler_on_the_way_gets_every_line_through_logging(
    stream: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("authsvc.worker.jobs")
    with caplog.at_level(logging.INFO):
        log_events(logger, [("claimed", logging.INFO, FIELDS), ("sent", logging.INFO, FIELDS)])
    assert [(r.getMessage(), r.job_id) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("claimed", 7), ("sent", 7)]
    assert [line["event"] for line in _lines(stream.getvalue())] == ["claimed", "sent"]
