"""Provider mode (`--transport http`): a local provider fake, crashes after accepting.

`--provider NAME` picks the fake (tools/local_*.py): resend (the default) and
brevo take an idempotency key, postmark, ses, sendgrid and mailgun do not,
and `hook` is an app that delivers its own mail (tools/local_hook.py),
which deduplicates on `webhook-id`.

The crash is injected from the provider's side, so no production code path
carries a fault hook: when a kill is armed, the fake stores the next
message it accepts and then, before answering, SIGKILLs the worker process
whose connection sent it (found by the connection's port). That worker can
no longer record the send; its lease expires, another worker claims the job
and sends it again — under the same key (the provider answers the first
result, or that it has it), with the same webhook-id (the app keeps one),
or, without a key, as a second copy: the crash window. Every such kill is
checked against the audit trail afterwards: it counts only if the killed
claim indeed recorded nothing.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import defaultdict

import psutil

from chaos.fleet import Fleet
from chaos.smtp import Receipt
from tools.local_brevo import LocalBrevo
from tools.local_hook import LocalHook
from tools.local_mailgun import LocalMailgun
from tools.local_postmark import LocalPostmark
from tools.local_provider import Delivered, FaultRates, LocalProvider
from tools.local_resend import LocalResend
from tools.local_sendgrid import LocalSendgrid
from tools.local_ses import LocalSes

# Per request: 429 with Retry-After, 500, stalls past the worker's timeout,
# connections dropped after accepting.
PROVIDER_FAULTS = FaultRates(rate_limited=0.03, server_error=0.03, stall_after_accept=0.01,
                             drop_after_accept=0.01, retry_after="1", stall_seconds=3.0)
FAKES: dict[str, type[LocalProvider]] = {
    fake.name: fake for fake in (LocalResend, LocalPostmark, LocalSes, LocalSendgrid,
                                 LocalMailgun, LocalBrevo, LocalHook)
}
# Where a repeat is harmless: the provider answers the first send (or that it
# has it), or the app deduplicates. Everywhere else a repeat is a second email.
DEDUPLICATED = ("resend", "brevo", "hook")


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


def start_provider(name: str, seed: int) -> LocalProvider:
    return FAKES[name](rates=PROVIDER_FAULTS, seed=seed).start()  # type: ignore[call-arg]


def receipts(provider: LocalProvider) -> list[Receipt]:
    """What the provider delivered (one per key, or per webhook-id), in the SMTP sink's terms."""
    return [Receipt(message_id=f"<authsvc-job-{d.public_job_id}@provider>",
                    recipient=",".join(d.to), token=d.token, received_at=d.accepted_at)
            for d in provider.snapshot()]


def hook_figures(hook: LocalProvider) -> dict[str, int]:
    """What the app saw: every POST, the copies it dropped, and ids that were not stable.

    Copies are grouped by what they carry (recipient and link), independently
    of their ids: one email with two webhook-ids, or one id on two emails,
    would be an unstable id.
    """
    ids_by_email: dict[str, set[str]] = defaultdict(set)
    emails_by_id: dict[str, set[str]] = defaultdict(set)
    accepted = 0
    for request in list(hook.requests):
        event = request["body"]
        if not isinstance(event, dict):
            continue
        accepted += 1
        data = event.get("data", {})
        email = json.dumps([data.get("to"), data.get("link")])
        webhook_id = request["headers"].get("webhook-id", "")
        ids_by_email[email].add(webhook_id)
        emails_by_id[webhook_id].add(email)
    unstable = sum(1 for ids in ids_by_email.values() if len(ids) > 1) + sum(
        1 for emails in emails_by_id.values() if len(emails) > 1)
    return {"posts": len(hook.requests), "copies_deduplicated": hook.replays,
            "unstable_ids": unstable, "emails": len(ids_by_email), "readable_posts": accepted}


def wait_idle(provider: LocalProvider, timeout: float) -> None:
    """Let stalled answers go out before the figures are read."""
    deadline = time.monotonic() + timeout
    while not provider.idle() and time.monotonic() < deadline:
        time.sleep(0.1)
