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
from datetime import UTC, datetime
from typing import Any

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
        return _ENCODER.encode(entry)


# One encoder for every line: json.dumps would build a new one per call.
_ENCODER = json.JSONEncoder(default=str)


def configure_logging(level: str = "INFO") -> None:
    """Route every logger to stderr as JSON lines (idempotent)."""
    # The lines carry neither the caller's file and line nor thread and
    # process names, so logging need not look them up for every record
    # (the logging HOWTO's "Optimization": a worker logs twice per email).
    logging._srcfile = None  # type: ignore[attr-defined]  # documented knob
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    if any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.handlers[:] = [handler]
    root.setLevel(level)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log `event` with `fields` as top-level JSON members."""
    logger.log(level, event, extra=fields)
