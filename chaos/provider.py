"""Provider mode (`--transport http`): the local Resend-like provider, crashes after accepting.

The crash is injected from the provider's side, so no production code path
carries a fault hook: when a kill is armed, the provider stores the next
message it accepts and then, before answering, SIGKILLs the worker process
whose connection sent it (found by the connection's port). That worker can
no longer record the send; its lease expires, another worker claims the job
and sends it again with the same Idempotency-Key, and the provider answers
the first result without delivering twice. Every such kill is checked
against the audit trail afterwards: it counts in `crash_window` only if the
killed claim indeed recorded nothing.
"""

from __future__ import annotations

import signal
import threading
import time

import psutil

from chaos.fleet import Fleet
from chaos.smtp import Receipt
from tools.local_resend import Delivered, FaultRates, LocalResend

# Per request: 429 with Retry-After, 500, stalls past the worker's timeout,
# connections dropped after accepting.
PROVIDER_FAULTS = FaultRates(rate_limited=0.03, server_error=0.03, stall_after_accept=0.01,
                             drop_after_accept=0.01, retry_after="1", stall_seconds=3.0)


class AcceptKiller:
    """Kills the sending worker between the provider's acceptance and the worker's record."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.killed_jobs: dict[str, int] = {}  # public job id → pid of the worker killed sending it
        self._armed = threading.Event()
        self._lock = threading.Lock()

    def arm(self) -> None:
        """Kill the sender of the next accepted message (once)."""
        self._armed.set()

    def on_accept(self, peer: tuple[str, int], delivered: Delivered) -> None:
        if not self._armed.is_set() or delivered.public_job_id is None:
            return
        with self._lock:
            if not self._armed.is_set():
                return
            pid = self._sender_pid(peer[1])
            if pid is None:
                return  # not found (already gone): try the next acceptance
            self._armed.clear()
            self.fleet.kill_worker(pid, signal.SIGKILL)
            self.killed_jobs[delivered.public_job_id] = pid

    def _sender_pid(self, port: int) -> int | None:
        for pid in self.fleet.worker_pids():
            try:
                connections = psutil.Process(pid).net_connections(kind="tcp")
            except psutil.Error:
                continue
            if any(c.laddr and c.laddr.port == port for c in connections):
                return pid
        return None


def start_provider(seed: int) -> LocalResend:
    return LocalResend(rates=PROVIDER_FAULTS, seed=seed).start()


def receipts(provider: LocalResend) -> list[Receipt]:
    """What the provider delivered (one per idempotency key), in the SMTP sink's terms."""
    return [Receipt(message_id=f"<authsvc-job-{d.public_job_id}@provider>",
                    recipient=",".join(d.to), token=d.token, received_at=d.accepted_at)
            for d in provider.snapshot()]


def wait_idle(provider: LocalResend, timeout: float) -> None:
    """Let stalled answers go out before the figures are read."""
    deadline = time.monotonic() + timeout
    while not provider.idle() and time.monotonic() < deadline:
        time.sleep(0.1)
