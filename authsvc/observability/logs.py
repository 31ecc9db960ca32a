"""One JSON object per log line, the same shape from every process, on stderr.

Every line has `ts`, `level`, `logger`, `event` and `message`, then the
event's fields at the top level. `event` is the machine name (log_event's
first argument); lines from libraries and gunicorn, whose text is prose,
get `event` "log" and keep their text in `message`.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": message if _EVENT_NAME.match(message) else "log",
            "message": message,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return _encode(entry)


def _encode(entry: dict[str, Any]) -> str:
    """One line of JSON, the same encoder for every line (log_events too)."""
    try:
        return orjson.dumps(entry, default=str, option=_ORJSON_OPTIONS).decode()
    except TypeError:  # what orjson refuses (an int over 64 bits, a non-str key)
        return _FALLBACK.encode(entry)


# datetimes through default=str: "2026-12-07 08:08:46.798366+00:00", as before orjson.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME
_FALLBACK = json.JSONEncoder(default=str, separators=(",", ":"))


class JsonLinesHandler(logging.StreamHandler[TextIO]):
    """configure_logging's handler: JSON lines on a stream. log_events writes batches of
    lines to it directly."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())

    def write_lines(self, text: str) -> None:
        """Write whole lines and flush them, under the handler's lock like emit."""
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            self.stream.write(text)
            self.flush()


def configure_logging(level: str = "INFO") -> None:
    """Route every logger to stderr as JSON lines at `level` (AUTHSVC_LOG_LEVEL) and up.

    Idempotent; a second call sets the level only."""
    # The lines carry neither the caller's file and line nor thread and
    # process names, so logging need not look them up for every record
    # (the logging HOWTO's "Optimization": a worker logs twice per email).
    logging._srcfile = None  # type: ignore[attr-defined]  # documented knob
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.setLevel(level)
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        root.handlers[:] = [JsonLinesHandler(sys.stderr)]


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `event` with `fields` as top-level JSON members."""
    logger.log(level, event, extra=fields)


def log_events(logger: logging.Logger, lines: Sequence[tuple[str, int, Mapping[str, Any]]]) -> None:
    """Log each (event, level, fields) as log_event would: the same JSON lines.

    The worker logs every claim and every outcome of a batch (SPEC §7). When
    the process logs as configure_logging set it up, the batch skips
    logging's per-record machinery: orjson encodes each line and one write
    (flushed, so a crash keeps it) carries them all: 2.5 µs a line in
    batches of 100 against 15 through logging (bench/log_lines.py), where
    a job's two lines had cost about 40 % of the worker's drain rate.
    Anything else on the way (a
    test capturing logs, a filter, another handler) gets each line through
    logging.
    """
    enabled = [line for line in lines if logger.isEnabledFor(line[1])]
    if not enabled:
        return
    handler = _only_json_handler(logger, min(level for _event, level, _fields in enabled))
    if handler is None:
        for event, level, fields in enabled:
            logger.log(level, event, extra=dict(fields))
        return
    ts = datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="milliseconds")
    head: dict[str, Any] = {"ts": ts, "level": "", "logger": logger.name, "event": "",
                            "message": ""}
    encoded = []
    for event, level, fields in enabled:
        head["level"] = _LEVEL_NAMES.get(level) or logging.getLevelName(level).lower()
        head["event"] = head["message"] = event
        encoded.append(_encode({**head, **fields}))
    handler.write_lines("\n".join(encoded) + "\n")


_LEVEL_NAMES = {level: logging.getLevelName(level).lower()
                for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                              logging.CRITICAL)}


def _only_json_handler(logger: logging.Logger, level: int) -> JsonLinesHandler | None:
    """The one handler a record of `logger` at `level` would reach, if it is a
    JsonLinesHandler and no filter could drop or change the record; else None."""
    found: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        found += [h for h in current.handlers if level >= h.level]
        if not current.propagate:
            break
        current = current.parent
    if len(found) != 1 or not isinstance(found[0], JsonLinesHandler) or found[0].filters:
        return None
    return found[0]
