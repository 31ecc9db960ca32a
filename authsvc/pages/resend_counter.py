"""How many page resends the per-address email limit held back, per purpose, for /metrics.

Per process, like the request counts: each gunicorn worker counts its own.
"""

from __future__ import annotations

import threading
from collections import Counter

from flask import Flask, current_app
from flask.sansio.app import App

_KEY = "authsvc_resends_suppressed"
NAME = "authsvc_page_resends_suppressed_total"


class ResendCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, purpose: str) -> None:
        with self._lock:
            self._counts[purpose] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


def install(app: App) -> None:
    app.extensions[_KEY] = ResendCounter()


def count_suppressed(purpose: str) -> None:
    counter: ResendCounter = current_app.extensions[_KEY]
    counter.add(purpose)


def metric_lines(app: Flask) -> list[str]:
    """The counter in Prometheus text format (both purposes, zero included)."""
    counts = app.extensions[_KEY].snapshot() if _KEY in app.extensions else {}
    return [
        f"# HELP {NAME} \"Send a new link\" requests the per-address email limit held back.",
        f"# TYPE {NAME} counter",
        *(f'{NAME}{{purpose="{p}"}} {counts.get(p, 0)}' for p in ("verify", "reset")),
    ]
