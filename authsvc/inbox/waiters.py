"""Long polls as coroutines: one LISTEN connection per process wakes every waiter on its scope.

The inbox's HTTP server (authsvc.inbox.server) parks each waiting request
here: a coroutine holding no thread and no pooled connection, so a process
can hold thousands of them. Each scope has an
asyncio.Event that a NOTIFY for the scope sets and replaces; a waiter takes the
current event *before* it checks the database, so a message committed between
its check and its wait still wakes it.

Without a direct URL to LISTEN on (`conninfo=None`: the pooled URL would
swallow notifications), and while the listening connection is down, every
waiter re-checks every FALLBACK_POLL_SECONDS (one rule, `_recheck_within`, for
the long polls and the event stream); logged once at start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

from authsvc.db.connections import connect_async
from authsvc.inbox.messages import NOTIFY_CHANNEL
from authsvc.observability.logs import log_event

log = logging.getLogger(__name__)
T = TypeVar("T")

# While the listening connection is down, or with no direct URL: slow polling, not missed mail.
FALLBACK_POLL_SECONDS = 1.0
RECONNECT_DELAY_SECONDS = 1.0


class AsyncScopeWatcher:
    """Fans NOTIFY payloads (scope names) out to the coroutines waiting on them."""

    def __init__(self, conninfo: str | None) -> None:
        self._conninfo = conninfo
        self._events: dict[str, asyncio.Event] = {}
        self._waiters: dict[str, int] = {}
        self._parked = 0
        self._any = asyncio.Event()
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    @property
    def waiting(self) -> int:
        """How many requests are parked right now (checked, and waiting for news)."""
        return self._parked

    def start(self) -> None:
        """Start listening (call on the loop that serves the requests)."""
        if self._conninfo is None:
            log_event(log, "listen_unavailable", logging.WARNING,
                      poll_seconds=FALLBACK_POLL_SECONDS,
                      error="no AUTHSVC_DIRECT_DATABASE_URL: long polls poll instead")
            return
        self._task = asyncio.get_running_loop().create_task(self._listen())

    def close(self) -> None:
        """The server is stopping: every event stream waiting for news wakes, and none
        waits again, so each ends now rather than when the shutdown's grace runs out.
        Parked long polls are left as they are: answering them now would tell a client
        "nothing arrived" when nothing was looked for; the grace ends them."""
        self.closed = True
        self._any.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task

    async def wait_until(
        self, scope: str, check: Callable[[], Awaitable[T]], done: Callable[[T], bool],
        timeout: float,
    ) -> T:
        """Await `check` until `done(result)` or `timeout` seconds pass; re-check only on news."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if timeout <= 0:
            return await check()
        with self._watching(scope):
            while True:
                # Taken before the check: news landing during it still wakes this waiter.
                # Before LISTEN is active nothing is announced; once it is, every scope is.
                news = self._events[scope]
                result = await check()
                remaining = deadline - loop.time()
                if done(result) or remaining <= 0:
                    return result
                await self._park(news, self._recheck_within(remaining))

    async def _park(self, news: asyncio.Event, seconds: float) -> None:
        self._parked += 1
        try:
            with suppress(TimeoutError):
                await asyncio.wait_for(news.wait(), seconds)
        finally:
            self._parked -= 1

    def _recheck_within(self, seconds: float) -> float:
        """How long a waiter may go without looking: without LISTEN no news ever comes, so a
        waiter looks again every FALLBACK_POLL_SECONDS rather than waiting blind."""
        if self._listening.is_set():
            return seconds
        return min(seconds, FALLBACK_POLL_SECONDS)

    async def any_news(self, timeout: float) -> bool:
        """Wait until a message may have landed in any scope: True on news (or, without
        LISTEN, when it is time to look again); False after `timeout` seconds of silence.
        True at once after close()."""
        if self.closed:
            return True
        news = self._any
        seconds = self._recheck_within(timeout)
        try:
            await asyncio.wait_for(news.wait(), seconds)
        except TimeoutError:
            return seconds < timeout
        return True

    @contextmanager
    def _watching(self, scope: str) -> Iterator[None]:
        self._waiters[scope] = self._waiters.get(scope, 0) + 1
        self._events.setdefault(scope, asyncio.Event())
        try:
            yield
        finally:
            self._waiters[scope] -= 1
            if not self._waiters[scope]:
                del self._waiters[scope], self._events[scope]

    def _announce(self, scope: str) -> None:
        news = self._events.get(scope)
        if news is not None:
            news.set()
            self._events[scope] = asyncio.Event()
        self._any.set()
        self._any = asyncio.Event()

    def _wake_everyone(self) -> None:
        # After a (re)connect notifications may have been missed: everybody re-checks.
        for scope in list(self._events):
            self._announce(scope)

    async def _listen(self) -> None:
        assert self._conninfo is not None
        while True:
            try:
                conn = await connect_async(self._conninfo)
                async with conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._listening.set()
                    self._wake_everyone()
                    async for notify in conn.notifies():
                        self._announce(notify.payload)
            except Exception as exc:  # any error: waiters poll meanwhile, never wait blind
                log_event(log, "inbox_listener_lost", logging.WARNING,
                          error=f"{type(exc).__name__}: {exc}")
            self._listening.clear()
            self._wake_everyone()
            await asyncio.sleep(RECONNECT_DELAY_SECONDS)
