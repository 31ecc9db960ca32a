"""The batched completer: senders hand over outcomes, one thread records them per statement.

Recording each outcome in its own commit cost about 60 % of a sender's time.
Here every sender puts its `Outcome` on one list and goes on to its next job;
one thread writes whatever is waiting in a single lease-guarded statement
(`jobs.record_outcomes`, audit rows included) as soon as its previous write
returns. That is group commit: an idle worker records a lone outcome at once,
a busy one records many per round trip, and no timer decides either.

The at-least-once window grows by what is handed over but not yet recorded,
so that is capped: `submit` blocks while `max_unrecorded` outcomes (waiting
plus being written) are outstanding. A killed worker therefore re-sends at
most its in-flight sends plus `max_unrecorded` (docs/worker.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg_pool import ConnectionPool

from authsvc.observability.logs import log_event
from authsvc.worker import jobs
from authsvc.worker.jobs import Outcome

log = logging.getLogger(__name__)


class CompleterStopped(Exception):
    """The completer died or was closed; the outcome was not taken."""


class Completer:
    """Records outcomes in batches on a thread of its own; `submit` is safe from any thread."""

    def __init__(
        self,
        pool: ConnectionPool,
        *,
        max_unrecorded: int,
        on_recorded: Callable[[int], None] | None = None,
    ) -> None:
        if max_unrecorded < 1:
            raise ValueError("max_unrecorded must be at least 1")
        self.pool = pool
        self.max_unrecorded = max_unrecorded
        self.on_recorded = on_recorded or (lambda _count: None)
        self.failure: BaseException | None = None
        self.batches = 0  # statements written, for tests and figures
        self.largest_batch = 0
        self._cond = threading.Condition()
        # Each outcome with its claim's lease deadline on time.monotonic(): the
        # one clock the worker judges its leases by (the database's lease_expires_at
        # is for the database; this host's wall clock may disagree with it).
        self._waiting: list[tuple[Outcome, float]] = []
        self._writing = 0
        self._closing = False
        self._dead = False
        self._thread = threading.Thread(target=self._run, name="completer", daemon=True)

    @property
    def unrecorded(self) -> int:
        """Outcomes handed over and not yet committed (waiting plus being written)."""
        with self._cond:
            return len(self._waiting) + self._writing

    def start(self) -> None:
        self._thread.start()

    def submit(self, outcome: Outcome, lease_deadline: float) -> None:
        """Queue `outcome` for the next write; blocks while the unrecorded cap is reached.

        `lease_deadline` (time.monotonic()) is when its claim's lease runs out:
        past it, through a database outage, the outcome is given up and logged.
        """
        with self._cond:
            while len(self._waiting) + self._writing >= self.max_unrecorded and not self._dead:
                self._cond.wait()
            if self._dead:
                raise CompleterStopped("the completer is not running") from self.failure
            self._waiting.append((outcome, lease_deadline))
            self._cond.notify_all()

    def close(self, timeout: float | None = None) -> bool:
        """Record everything handed over, then stop; False if that took longer than `timeout`."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._waiting and not self._closing:
                        self._cond.wait()
                    if not self._waiting:
                        return
                    # The cap on submit keeps this at most max_unrecorded.
                    batch, self._waiting = self._waiting, []
                    self._writing = len(batch)
                try:
                    self._write(batch)
                    self.on_recorded(len(batch))
                finally:
                    with self._cond:
                        self._writing = 0
                        self.batches += 1
                        self.largest_batch = max(self.largest_batch, len(batch))
                        self._cond.notify_all()
        except BaseException as exc:
            # Unexpected (a bug, not the database): the worker stops and the
            # leases hand the unrecorded jobs back.
            log.exception("completer_crashed")
            self.failure = exc
        finally:
            with self._cond:
                self._dead = True
                self._cond.notify_all()

    def _write(self, batch: list[tuple[Outcome, float]]) -> None:
        """One statement for the batch; through a database outage for as long as leases last."""
        delay = 0.1
        while batch:
            try:
                with self.pool.connection(timeout=5) as conn:
                    jobs.record_outcomes(conn, [outcome for outcome, _deadline in batch])
                return
            except psycopg.OperationalError as exc:
                # No connection check at checkout (it cost a round trip per
                # statement): check the pool now that one has failed.
                self.pool.check()
                now = time.monotonic()
                for outcome, lease_deadline in batch:
                    if lease_deadline <= now:
                        # Another worker may claim (and re-send) it now.
                        log_event(log, "outcome_unrecorded", logging.ERROR,
                                  job_id=outcome.job.id, lease_owner=outcome.job.lease_owner,
                                  lease_expires_at=outcome.job.lease_expires_at,
                                  attempt=outcome.job.attempt_count,
                                  token_version=outcome.job.token_version,
                                  provider_message_id=outcome.provider_message_id,
                                  outcome=outcome.event, error=str(exc))
                batch = [(o, deadline) for o, deadline in batch if deadline > now]
                if batch:
                    log_event(log, "database_unavailable", logging.WARNING,
                              unrecorded=len(batch), error=str(exc), retry_in_seconds=delay)
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
