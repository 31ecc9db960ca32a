"""After the run: compare the database, the audit trail and the mail received."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import psycopg

from chaos.load import ApiClient
from chaos.smtp import Receipt

# Mail names a job by its public id (email_jobs.public_id); the trail by its internal one.
_PUBLIC_JOB_ID = re.compile(r"<authsvc-job-([0-9a-f-]{36})@")
# Outcomes a worker records while it holds a lease; a killed worker records none.
_OUTCOMES = {"sent", "failed", "superseded", "expired", "suppressed", "retry", "ambiguous",
             "released", "lease_lost"}
CONFIRM_PATHS = {"verify": "/api/v1/verifications/confirm",
                 "reset": "/api/v1/password-resets/confirm",
                 "sign_in": "/api/v1/sign-in-links/confirm"}
# The order a user's current links are redeemed in: a sign-in proves the address
# (its verify link dies), and a reset retires both the verify and the sign-in link.
_REDEEM_ORDER = {"verify": 0, "sign_in": 1, "reset": 2}
CURRENT_RESET_SAMPLE = 25  # each costs a production-strength argon2 hash
CONFIRM_TRIES = 10  # a redemption answered 503 is tried again, as a client would
NEW_PASSWORD = "chaos-survivor-passphrase-42"  # noqa: S105  (set by redeemed reset links)
# The figures on every summary line, whatever the transport.
_COUNTED = ("expected", "delivered", "lost", "stuck", "duplicates", "crash_window",
            "stale_redemptions", "kills")


@dataclass
class Report:
    requests: int
    transport: str = "smtp"
    provider: str | None = None  # --transport http: which fake
    accepted: int = 0
    jobs: int = 0
    expected: int = 0
    delivered: int = 0
    lost: int = 0
    stuck: int = 0
    duplicates: int = 0
    crash_window: int = 0
    stale_redemptions: int = 0
    kills: int = 0
    max_duplicates_per_kill: int = 0
    db_restarts: int = 0
    failovers: int | None = None  # counted in --failover runs only
    unstable_ids: int = 0  # hook: emails seen under two webhook-ids, or two under one
    problems: list[str] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)

    def line(self) -> str:
        """The run's summary line, `name=value` a figure, as tests/test_chaos.py reads it."""
        if self.transport == "http":
            names = ["requests", "transport", "provider", *_COUNTED, "db_restarts"]
        else:
            names = ["requests", *_COUNTED, "max_duplicates_per_kill", "db_restarts"]
            if self.failovers is not None:
                names.append("failovers")
        return "chaos: " + " ".join(f"{name}={getattr(self, name)}" for name in names)


@dataclass(frozen=True)
class Job:
    id: int
    user_id: int | None  # None once its account was deleted
    purpose: str
    token_version: int
    current_version: int | None  # the account's, now; None for undo links and deleted accounts
    status: str
    stuck: bool
    load: bool  # one of the link load's requests (the rest are the mailbox holders', chaos/life.py)


# Every link job, with its account's current version of its purpose (link_version:
# the one place that says which column holds it).
_JOBS = """
SELECT j.id, j.user_id, j.purpose, j.token_version, link_version(u, j.purpose), j.status,
       j.status = 'pending' AND greatest(j.next_attempt_at, j.lease_expires_at)
         < now() - make_interval(secs => %s),
       j.recipient LIKE 'chaos-%%'
FROM email_jobs AS j LEFT JOIN users AS u ON u.id = j.user_id
WHERE j.purpose IS NOT NULL
"""


def _load_jobs(conn: psycopg.Connection, stuck_after_seconds: float) -> dict[int, Job]:
    rows = conn.execute(_JOBS, (stuck_after_seconds,)).fetchall()
    return {r[0]: Job(*r) for r in rows}


def _killed_claims(trail: list[tuple[str, str | None]], killed_pids: set[int]) -> set[str]:
    """Owners (killed workers) that claimed this job and never recorded an outcome for it."""
    owners = set()
    for i, (event, owner) in enumerate(trail):
        if event != "claimed" or owner is None or int(owner.split(":")[-2]) not in killed_pids:
            continue
        if not any(e in _OUTCOMES and o == owner for e, o in trail[i + 1:]):
            owners.add(owner)
    return owners


def _in_crash_window(trail: list[tuple[str, str | None]], killed_pids: set[int]) -> bool:
    """A second delivery is expected only if an attempt's outcome was never known:
    the server dropped the line after accepting (ambiguous), the lease ran out
    mid-send (lease_lost), or the worker was killed between claim and record."""
    events = [event for event, _owner in trail]
    return ("ambiguous" in events or "lease_lost" in events
            or bool(_killed_claims(trail, killed_pids)))


def reconcile(
    conn: psycopg.Connection,
    report: Report,
    receipts: list[Receipt],
    killed_pids: list[int],
    stuck_after_seconds: float,
    deleted: frozenset[str] = frozenset(),
) -> None:
    """Fill in the delivery figures and record every broken guarantee in `report.problems`.

    Mail to a `deleted` account's address may name a job that is gone: the
    deletion dropped it while it was pending (a retry after a kill, or a send
    in flight), as SPEC §12 says.
    """
    jobs = _load_jobs(conn, stuck_after_seconds)
    report.jobs = sum(1 for j in jobs.values() if j.load)
    internal = _internal_ids(conn)
    by_job: dict[int, list[Receipt]] = defaultdict(list)
    for receipt in receipts:
        job_id = _job_of(receipt, internal)
        if job_id is None and receipt.recipient not in deleted:
            report.problems.append(f"mail with an unknown Message-ID: {receipt.message_id!r}")
        if job_id in jobs:  # a link; notices (no purpose) are the mailbox holders' concern
            by_job[job_id].append(receipt)

    if report.jobs != report.accepted:
        report.problems.append(f"{report.accepted} requests accepted but {report.jobs} jobs queued")
    superseded = [j for j in jobs.values() if j.status == "superseded"]
    for job in superseded:
        if job.current_version is not None and job.token_version >= job.current_version:
            report.problems.append(f"job {job.id} marked superseded but its version is current")
    must_arrive = [j for j in jobs.values() if j.status != "superseded"]
    report.expected = len(must_arrive)
    report.delivered = sum(1 for j in must_arrive if by_job.get(j.id))
    report.lost = report.expected - report.delivered + max(0, report.accepted - report.jobs)
    report.stuck = sum(1 for j in jobs.values() if j.stuck)
    report.details["statuses"] = dict(Counter(j.status for j in jobs.values()))
    unsent = [j.id for j in must_arrive if j.status == "sent" and not by_job.get(j.id)]
    if unsent:
        report.problems.append(f"jobs marked sent but never received: {unsent[:10]}")

    trails: dict[int, list[tuple[str, str | None]]] = defaultdict(list)
    for job_id, event, owner in conn.execute(
        "SELECT job_id, event, lease_owner FROM email_job_events ORDER BY id"
    ):
        trails[job_id].append((event, owner))
    for job_id in jobs:
        if by_job.get(job_id) and "claimed" not in [e for e, _ in trails[job_id]]:
            report.problems.append(f"job {job_id} was delivered with no claim in its trail")
    killed = set(killed_pids)
    duplicated = [job_id for job_id, got in by_job.items() if len(got) > 1]
    report.duplicates = len(duplicated)
    explained = [j for j in duplicated if _in_crash_window(trails[j], killed)]
    report.crash_window = len(explained)
    # Each kill ends one process (one lease owner): count the re-sends it caused.
    per_kill: Counter[str] = Counter()
    for job_id in duplicated:
        per_kill.update(_killed_claims(trails[job_id], killed))
    report.max_duplicates_per_kill = max(per_kill.values(), default=0)
    report.details["duplicates_per_kill"] = sorted(per_kill.values(), reverse=True)[:10]
    if report.duplicates > report.crash_window:
        unexplained = sorted(set(duplicated) - set(explained))[:10]
        report.problems.append(f"duplicates outside the crash window: jobs {unexplained}")


def count_crash_window(
    conn: psycopg.Connection, report: Report, killed_jobs: dict[str, int], *, keyed: bool = True
) -> None:
    """Provider mode: sends the provider accepted whose worker was killed before recording.

    Each is confirmed by the trail: the killed worker's claim of the job has
    no outcome after it. Over HTTP with an idempotency key these are not
    duplicates; `report.duplicates` counts jobs delivered more than once.
    Without a key (`keyed=False`) the window is every job whose outcome was
    unknown once: a claim of a killed worker that recorded nothing (the
    victim and whatever else it had in flight), an `ambiguous` send, a
    `lease_lost` one. Each may have been delivered, and its retry a copy.
    """
    confirmed: set[int] = set()
    internal = _internal_ids(conn)
    for public_id, pid in killed_jobs.items():
        job_id = internal.get(public_id)
        trail = conn.execute("SELECT event, lease_owner FROM email_job_events"
                             " WHERE job_id = %s ORDER BY id", (job_id,)).fetchall()
        if job_id is not None and _killed_claims(trail, {pid}):
            confirmed.add(job_id)
        else:
            report.problems.append(f"job {job_id}: its sender was killed but recorded anyway")
    if not keyed:
        # A kill ends every send its worker had in flight or unrecorded, not
        # only the one it was aimed at: each such job is in the window too.
        killed = set(killed_jobs.values())
        trails: dict[int, list[tuple[str, str | None]]] = defaultdict(list)
        for job_id, event, owner in conn.execute(
                "SELECT job_id, event, lease_owner FROM email_job_events ORDER BY id"):
            trails[job_id].append((event, owner))
        confirmed |= {job_id for job_id, trail in trails.items()
                      if _in_crash_window(trail, killed)}
    report.crash_window = len(confirmed)


def check_redemptions(
    client: ApiClient, conn: psycopg.Connection, report: Report, receipts: list[Receipt]
) -> None:
    """Every stale link must answer token_superseded; current links redeem exactly once."""
    jobs = _load_jobs(conn, 0.0)
    internal = _internal_ids(conn)
    stale: list[tuple[str, str]] = []
    current: dict[tuple[int, str], str] = {}
    for receipt in receipts:
        job_id = _job_of(receipt, internal)
        job = jobs.get(job_id) if job_id is not None else None
        # The mailbox holders check their own links (chaos/life.py).
        if job is None or receipt.token is None or not job.load or job.user_id is None:
            continue
        assert job.current_version is not None  # verify, reset and sign-in links
        if job.token_version < job.current_version:
            stale.append((job.purpose, receipt.token))
        else:
            current[(job.user_id, job.purpose)] = receipt.token
    answers: Counter[str] = Counter()
    for purpose, token in stale:
        status, body = _confirm(client, purpose, token)
        answers[f"stale {status} {body.get('code', '')}".strip()] += 1
        if status < 400:
            report.stale_redemptions += 1
        elif body.get("code") != "token_superseded":
            report.problems.append(f"stale {purpose} link answered {status} {body.get('code')}")
    resets = 0
    ordered = sorted(current.items(),
                     key=lambda item: (item[0][0], _REDEEM_ORDER[item[0][1]]))
    for (_user_id, purpose), token in ordered:
        if purpose == "reset":
            resets += 1
            if resets > CURRENT_RESET_SAMPLE:
                continue
        first, _ = _confirm(client, purpose, token)
        again, body = _confirm(client, purpose, token)
        answers[f"current {first} then {again} {body.get('code', '')}"] += 1
        answers[f"current {purpose}"] += 1
        if first != 200 or body.get("code") != "token_used":
            report.problems.append(f"current {purpose} link: {first}, then {again} {body}")
    report.details["redemptions"] = dict(answers)


def _confirm(client: ApiClient, purpose: str, token: str) -> tuple[int, dict]:
    # The mailbox's holder chooses the password: required for a reset, and
    # for a verify link after a resend (a contested address, SPEC §4a). A
    # sign-in takes none (it discards an unproven account's password).
    body: dict[str, object] = {"token": token}
    if purpose != "sign_in":
        body["password"] = NEW_PASSWORD
    # A 503 (Retry-After) changed nothing, and a client tries again: after the
    # database restart, a web process's first request may meet a dead pooled
    # connection (docs/OPERATIONS.md). The answer that counts is the final one.
    for _attempt in range(CONFIRM_TRIES):
        status, reply = client.post(CONFIRM_PATHS[purpose], body)
        if status != 503:
            break
        time.sleep(0.2)  # the Retry-After a client would honour, shortened
    return status, reply


def _internal_ids(conn: psycopg.Connection) -> dict[str, int]:
    """Public job id (as mail carries it) -> internal id (as the trail has it)."""
    return {str(public_id): job_id for public_id, job_id in conn.execute(
        "SELECT public_id, id FROM email_jobs WHERE public_id IS NOT NULL")}


def _job_of(receipt: Receipt, internal: dict[str, int]) -> int | None:
    match = _PUBLIC_JOB_ID.search(receipt.message_id)
    return internal.get(match.group(1)) if match else None
