"""Long polls that wake on LISTEN/NOTIFY: one listening connection per process.

Every waiting request registers the scope it watches; a single background
thread LISTENs and bumps a per-scope counter when the sink announces a new
message, waking only the requests that watch that scope. The thread runs
while anybody waits (and a little longer, to keep the connection warm), so
an idle process holds no extra connection.

Each waiting request also holds a gunicorn thread, so the watcher caps how
many may wait at once (`max_waiters` per process): past the cap a request
that would have to wait gets TooManyWaiters at once (the view answers 503
with Retry-After), leaving the other threads for everything else.

LISTEN needs the direct URL (a transaction pooler would swallow the
notifications); built without one (`conninfo=None`) the watcher never
listens and every waiter polls every FALLBACK_POLL_SECONDS, logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg

from authsvc.db import connect
from authsvc.inbox.messages import NOTIFY_CHANNEL
from authsvc.logs import log_event

log = logging.getLogger(__name__)
T = TypeVar("T")

LINGER_SECONDS = 30.0
# Used while the listening connection is down (or there is no direct URL to
# listen on), so a lost connection degrades to slow polling, never missed mail.
FALLBACK_POLL_SECONDS = 1.0
RECONNECT_DELAY_SECONDS = 1.0
# Well under gunicorn's threads per worker (16 under `authsvc dev`).
DEFAULT_MAX_WAITERS = 8


class TooManyWaiters(Exception):
    """Every waiting slot of this process is taken; retry shortly."""


class ScopeWatcher:
    """Fans NOTIFY payloads (scope names) out to the requests waiting on them."""

    def __init__(
        self, conninfo: str | None, *, max_waiters: int = DEFAULT_MAX_WAITERS
    ) -> None:
        self._conninfo = conninfo
        self.max_waiters = max_waiters
        self._slots = threading.BoundedSemaphore(max_waiters)
        self._changed = threading.Condition()
        self._counters: dict[str, int] = {}
        self._watchers: dict[str, int] = {}
        # Bumped on every (re)connect: notifications may have been missed.
        self._epoch = 0
        self._listening = False
        self._thread: threading.Thread | None = None
        self._last_waiter_left = time.monotonic()

    def wait_until(
        self, scope: str, check: Callable[[], T], done: Callable[[T], bool], timeout: float
    ) -> T:
        """Call `check` until `done(result)` or `timeout` seconds pass; re-check only on news.

        Nothing to wait for (done at once, or no timeout) starts no listener;
        TooManyWaiters when it would have to wait and every slot is taken.
        """
        deadline = time.monotonic() + timeout
        result = check()
        if done(result) or timeout <= 0:
            return result
        if not self._slots.acquire(blocking=False):
            raise TooManyWaiters(f"{self.max_waiters} requests are already waiting")
        try:
            return self._wait(scope, check, done, deadline)
        finally:
            self._slots.release()

    def _wait(
        self, scope: str, check: Callable[[], T], done: Callable[[T], bool], deadline: float
    ) -> T:
        with self._watching(scope):
            self._wait_listening(deadline)
            while True:
                seen = self._version(scope)
                result = check()
                remaining = deadline - time.monotonic()
                if done(result) or remaining <= 0:
                    return result
                with self._changed:
                    if not self._listening:
                        remaining = min(remaining, FALLBACK_POLL_SECONDS)
                    self._changed.wait_for(self._changed_since(scope, seen), remaining)

    def _version(self, scope: str) -> tuple[int, int]:
        return self._epoch, self._counters.get(scope, 0)

    def _changed_since(self, scope: str, seen: tuple[int, int]) -> Callable[[], bool]:
        return lambda: self._version(scope) != seen

    @contextmanager
    def _watching(self, scope: str) -> Iterator[None]:
        with self._changed:
            self._watchers[scope] = self._watchers.get(scope, 0) + 1
            self._counters.setdefault(scope, 0)
            if self._conninfo is None:
                if self._thread is None:  # said once per watcher
                    self._thread = threading.current_thread()
                    log_event(log, "listen_unavailable", logging.WARNING,
                              poll_seconds=FALLBACK_POLL_SECONDS,
                              error="no AUTHSVC_DIRECT_DATABASE_URL: long polls poll instead")
            elif self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, name="inbox-listener", daemon=True
                )
                self._thread.start()
        try:
            yield
        finally:
            with self._changed:
                self._watchers[scope] -= 1
                if not self._watchers[scope]:
                    del self._watchers[scope], self._counters[scope]
                if not self._watchers:
                    self._last_waiter_left = time.monotonic()

    def _wait_listening(self, deadline: float) -> None:
        # Checking before LISTEN is active could miss a message that lands in
        # between; wait briefly for it (the fallback poll covers a dead server).
        if self._conninfo is None:
            return
        with self._changed:
            limit = min(deadline, time.monotonic() + 2 * RECONNECT_DELAY_SECONDS)
            self._changed.wait_for(lambda: self._listening, max(0.0, limit - time.monotonic()))

    def _should_stop(self, linger: float = LINGER_SECONDS) -> bool:
        with self._changed:
            idle = time.monotonic() - self._last_waiter_left > linger
            if not self._watchers and idle:
                self._thread = None
                return True
            return False

    def _set_listening(self, listening: bool) -> None:
        with self._changed:
            if self._thread not in (threading.current_thread(), None):
                return  # a newer listener thread owns the state now
            self._listening = listening
            self._epoch += 1
            self._changed.notify_all()

    def _announce(self, scope: str) -> None:
        with self._changed:
            if scope in self._counters:
                self._counters[scope] += 1
                self._changed.notify_all()

    def _listen(self) -> None:
        assert self._conninfo is not None
        while True:
            try:
                with connect(self._conninfo) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")  # as coroutine_waiters.py: unquoted
                    self._set_listening(True)
                    while not self._should_stop():
                        for notify in conn.notifies(timeout=1.0):
                            self._announce(notify.payload)
                    self._set_listening(False)
                    return
            except psycopg.Error as exc:
                self._set_listening(False)
                # Nobody waiting: let the next waiter reconnect instead of retrying here.
                if self._should_stop(linger=0.0):
                    return
                log_event(log, "inbox_listener_lost", logging.WARNING, error=str(exc))
            time.sleep(RECONNECT_DELAY_SECONDS)
