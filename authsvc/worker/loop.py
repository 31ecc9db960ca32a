"""The worker process: claim due jobs ahead, hand them to sender threads, record in batches.

The main thread claims, keeping up to max(batch, concurrency) jobs queued
ahead of the senders so none waits for a claim round trip; `concurrency`
sender threads each hold one mailer (so an SMTP connection is reused across
jobs) and hand each outcome to the completer (authsvc/worker/completer.py), which
records them in batches; a listener thread turns NOTIFYs into wake-ups. The
main thread sleeps on one event that a notification, the poll interval, a
draining queue, a recorded batch or a stop request sets.

LISTEN runs only on the direct URL (`listen_url`, AUTHSVC_DIRECT_DATABASE_URL):
through a transaction pooler it would hear nothing. Without one the worker
polls every min(poll_seconds, POLL_WITHOUT_LISTEN_SECONDS) and says so once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from authsvc.accounts.code_tries import prune_code_attempts
from authsvc.apps.idempotency import prune_idempotency_keys
from authsvc.clock import system_clock
from authsvc.db.connections import connect, create_pool, is_direct
from authsvc.observability.logs import log_event
from authsvc.outbox import NOTIFY_CHANNEL
from authsvc.outbox.admin import fold_counters
from authsvc.ratelimit import prune_rate_limits
from authsvc.worker import jobs
from authsvc.worker.completer import Completer, CompleterStopped
from authsvc.worker.delivery import Delivery, RetryPolicy
from authsvc.worker.event_delivery import WebhookDelivery
from authsvc.worker.hook_delivery import HookDelivery
from authsvc.worker.jobs import ClaimedJob, Outcome
from authsvc.worker.mailers import MAILER_IDLE_SECONDS, Mailer
from authsvc.worker.metrics_port import WorkerMetrics
from authsvc.worker.render import Renderer

log = logging.getLogger(__name__)
PRUNE_EVERY_SECONDS = 600.0
# The outbox counters' deltas (one row or a few per statement) are folded this
# often, so a read that adds them up stays cheap and, with nobody scraping,
# they do not pile up (migrations/0026_baseline.sql).
FOLD_EVERY_SECONDS = 1.0
# Without a direct URL nothing wakes the worker early: look this often instead.
POLL_WITHOUT_LISTEN_SECONDS = 1.0


@dataclass(frozen=True)
class WorkerOptions:
    concurrency: int = 4
    batch: int = 10
    lease_seconds: float = 45.0
    poll_seconds: float = 5.0
    once: bool = False
    shutdown_grace_seconds: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def send_timeout(self) -> float:
        """SMTP connect/read timeout: well inside the lease, so a stuck send cannot outlive it."""
        return max(0.25, min(30.0, self.lease_seconds / 4))


Claim = tuple[ClaimedJob, float]  # the job and its lease deadline on time.monotonic()


class MailerUnavailable(Exception):
    """A sender could not build its mailer (bad transport settings, no TLS store, ...)."""


class Worker:
    """One worker process's machinery; `run()` blocks until stopped (or drained, with once)."""

    def __init__(
        self,
        url: str,
        renderer: Renderer,
        mailer_factory: Callable[[float], Mailer],
        options: WorkerOptions,
        *,
        owner: str | None = None,
        webhooks: WebhookDelivery | None = None,
        listen_url: str | None = None,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        self.url = url
        self.listen_url = listen_url
        self.metrics = metrics or WorkerMetrics()
        self.renderer = renderer
        self.mailer_factory = mailer_factory
        self.options = options
        self.owner = owner or jobs.new_lease_owner()
        self.webhooks = webhooks  # None: this worker cannot sign, webhook jobs wait
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self._wake = threading.Event()
        self._queue: queue.Queue[Claim | None] = queue.Queue()
        self._lock = threading.Lock()
        self._unfinished = 0  # claimed by this process and not yet recorded
        self._more_due = False  # the last claim was full: probably more is due
        # Claim again once fewer than this many jobs wait for a sender.
        self._ahead = max(options.batch, options.concurrency)
        self._completer: Completer | None = None

    def request_stop(self) -> None:
        """Stop claiming; in-flight sends finish, unsent claims are released."""
        self.stop.set()
        self._wake.set()

    def run(self) -> None:
        opts = self.options
        # Claims, the completer and housekeeping share it; senders never
        # touch the database. No check at checkout: errors trigger one.
        pool = create_pool(self.url, min_size=2, max_size=4, name="authsvc-worker", check=False,
                           direct=is_direct(self.url, self.listen_url))
        hook = None if self.webhooks is None else HookDelivery(
            self.webhooks.secret_keys, opts.send_timeout, self.webhooks.production)
        delivery = Delivery(pool, self.renderer, opts.retry, opts.send_timeout, system_clock,
                            hook=hook)
        completer = Completer(pool, max_unrecorded=opts.batch, on_recorded=self._recorded)
        self._completer = completer
        completer.start()
        threads = [
            threading.Thread(target=self._sender, args=(delivery,), name=f"sender-{i}", daemon=True)
            for i in range(opts.concurrency)
        ]
        if not opts.once and self.listen_url is not None:
            threads.append(threading.Thread(target=self._listen, name="listener", daemon=True))
        elif not opts.once:
            log_event(log, "listen_unavailable", logging.WARNING, lease_owner=self.owner,
                      poll_seconds=self._poll_seconds,
                      error="no AUTHSVC_DIRECT_DATABASE_URL: polling instead of LISTEN")
        for thread in threads:
            thread.start()
        log_event(log, "worker_started", lease_owner=self.owner, concurrency=opts.concurrency,
                  batch=opts.batch, lease_seconds=opts.lease_seconds)
        try:
            self._claim_loop(pool)
        finally:
            self.request_stop()
            self._shutdown(completer, threads)
            pool.close()
            log_event(log, "worker_stopped", lease_owner=self.owner)
        if self.failure is not None:
            raise self.failure

    def _claim_loop(self, pool: ConnectionPool) -> None:
        opts = self.options
        next_prune = next_fold = time.monotonic()
        backoff = 0.5
        while not self.stop.is_set():
            self._wake.clear()
            claimed = 0
            try:
                if self._queue.qsize() < self._ahead:
                    claimed = self._claim(pool)
                if time.monotonic() >= next_prune:
                    # Housekeeping for the web side's expiring state; the
                    # worker is the one long-running process every install has.
                    with pool.connection(timeout=5) as conn:
                        prune_rate_limits(conn, system_clock())
                        prune_idempotency_keys(conn, system_clock())
                        prune_code_attempts(
                            conn, system_clock(), self.renderer.codec.longest_code_ttl()
                        )
                    next_prune = time.monotonic() + PRUNE_EVERY_SECONDS
                if time.monotonic() >= next_fold:
                    with pool.connection(timeout=5) as conn:
                        fold_counters(conn)
                    next_fold = time.monotonic() + FOLD_EVERY_SECONDS
                backoff = 0.5
            except psycopg.OperationalError as exc:
                self.metrics.database_errors.inc()
                pool.check()  # drop the broken connections before the next try
                log_event(log, "database_unavailable", logging.WARNING,
                          lease_owner=self.owner, error=str(exc), retry_in_seconds=backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
                continue
            if claimed == opts.batch:
                continue  # probably more due; claim again once there is room
            with self._lock:
                idle = self._unfinished == 0
            if opts.once and claimed == 0 and idle:
                return
            self._wake.wait(self._poll_seconds)

    @property
    def _poll_seconds(self) -> float:
        if self.listen_url is None:
            return min(self.options.poll_seconds, POLL_WITHOUT_LISTEN_SECONDS)
        return self.options.poll_seconds

    def _claim(self, pool: ConnectionPool) -> int:
        opts = self.options
        # Taken before the claim, so the local deadline falls no later than
        # the lease the database recorded.
        deadline = time.monotonic() + opts.lease_seconds
        with pool.connection(timeout=5) as conn:
            claimed = jobs.claim_batch(conn, self.owner, opts.batch, opts.lease_seconds)
        with self._lock:
            self._unfinished += len(claimed)
            self.metrics.unfinished.set(self._unfinished)
        self.metrics.claimed.inc(len(claimed))
        self._more_due = len(claimed) == opts.batch
        for job in claimed:
            self._queue.put((job, deadline))
        return len(claimed)

    def _recorded(self, count: int) -> None:
        with self._lock:
            self._unfinished -= count
            self.metrics.unfinished.set(self._unfinished)
        self._wake.set()

    def _sender(self, delivery: Delivery) -> None:
        assert self._completer is not None
        completer = self._completer
        try:
            mailer = self.mailer_factory(self.options.send_timeout)
        except Exception as exc:
            # A sender without a mailer would leave a live process that sends
            # nothing: end it, saying why; the leases hand its jobs back.
            log_event(log, "mailer_unavailable", logging.ERROR, lease_owner=self.owner,
                      error=f"{type(exc).__name__}: {exc}")
            with self._lock:
                if self.failure is None:
                    self.failure = MailerUnavailable(f"cannot build the mailer: {exc}")
            self.request_stop()
            return
        try:
            while True:
                try:
                    item = self._queue.get(timeout=MAILER_IDLE_SECONDS)
                except queue.Empty:
                    mailer.close()  # do not hold an idle SMTP connection open
                    continue
                if item is None:
                    return
                if self._more_due and self._queue.qsize() < self._ahead:
                    self._wake.set()  # claim ahead, before this sender runs dry
                job, deadline = item
                handed_over = False
                try:
                    if self.stop.is_set():
                        outcome = Outcome(job, "released", error="shutdown")
                    elif job.kind == "webhook":
                        outcome = self._webhook_outcome(job, deadline)
                    else:
                        with self.metrics.send_seconds.time():
                            outcome = delivery.decide(mailer, job, deadline)
                    self.metrics.outcomes.labels(outcome.event).inc()
                    completer.submit(outcome, deadline)
                    handed_over = True
                except CompleterStopped:
                    # The completer died (and said why); stop, the leases hand the jobs back.
                    self.request_stop()
                except BaseException as exc:
                    # Unexpected: stop the process; the lease hands the job back.
                    log.exception(
                        "sender_crashed", extra={"job_id": job.id, "lease_owner": self.owner}
                    )
                    self.failure = exc
                    self.request_stop()
                finally:
                    if not handed_over:
                        self._recorded(1)
        finally:
            mailer.close()

    def _webhook_outcome(self, job: ClaimedJob, deadline: float) -> Outcome:
        if self.webhooks is None:
            delay = self.options.retry.delay(job.attempt_count)
            return Outcome(job, "retry", delay_seconds=delay,
                           error="this worker was started without webhook delivery")
        return self.webhooks.decide(job, deadline)

    def _listen(self) -> None:
        """Turn NOTIFYs into wake-ups; reconnect (and poll once) after losing the database."""
        assert self.listen_url is not None
        backoff = 0.5
        while not self.stop.is_set():
            try:
                with connect(self.listen_url, connect_timeout=5) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(NOTIFY_CHANNEL)))
                    # Anything queued while we were not listening: look now.
                    self._wake.set()
                    backoff = 0.5
                    while not self.stop.is_set():
                        for _ in conn.notifies(timeout=1.0):
                            self._wake.set()
            except Exception as exc:
                # Not only OperationalError: a closed connection raises
                # InterfaceError, a pooler's refusal ProgrammingError. A
                # listener that died quietly would leave the worker polling
                # with nobody told.
                log_event(log, "listener_disconnected", logging.WARNING,
                          lease_owner=self.owner, error=f"{type(exc).__name__}: {exc}",
                          retry_in_seconds=backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _shutdown(self, completer: Completer, threads: list[threading.Thread]) -> None:
        # Claimed but not yet picked up by a sender: hand back right away.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                try:
                    completer.submit(Outcome(item[0], "released", error="shutdown"), item[1])
                except CompleterStopped:
                    self._recorded(1)
        for _ in range(self.options.concurrency):
            self._queue.put(None)
        deadline = time.monotonic() + self.options.shutdown_grace_seconds
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [t.name for t in threads if t.is_alive() and t.name != "listener"]
        if stuck:
            log_event(log, "shutdown_timeout", logging.WARNING, lease_owner=self.owner,
                      error=f"{len(stuck)} send(s) still running; their leases will expire")
        # Everything handed over is recorded before the pool closes; a database
        # outage can hold this up to the longest lease, as recording always could.
        completer.close(timeout=self.options.lease_seconds + 5)
        if completer.failure is not None and self.failure is None:
            self.failure = completer.failure
