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
    user_id: int
    purpose: str
    token_version: int
    status: str
    stuck: bool


def _load_jobs(conn: psycopg.Connection, stuck_after_seconds: float) -> dict[int, Job]:
    rows = conn.execute(
        "SELECT id, user_id, purpose, token_version, status,"
        " status = 'pending' AND greatest(next_attempt_at, lease_expires_at)"
        "   < now() - make_interval(secs => %s)"
        " FROM email_jobs WHERE purpose IS NOT NULL",
        (stuck_after_seconds,),
    ).fetchall()
    return {r[0]: Job(*r) for r in rows}


def _current_versions(conn: psycopg.Connection) -> dict[tuple[int, str], int]:
    versions: dict[tuple[int, str], int] = {}
    rows = conn.execute("SELECT id, reset_version, verify_version, sign_in_version FROM users")
    for user_id, reset, verify, sign_in in rows:
        versions[(user_id, "reset")] = reset
        versions[(user_id, "verify")] = verify
        versions[(user_id, "sign_in")] = sign_in
    return versions


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
    if "ambiguous" in events or "lease_lost" in events:
        return True
    for i, (event, owner) in enumerate(trail):
        if event != "claimed" or owner is None or int(owner.split(":")[-2]) not in killed_pids:
            continue
        if not any(e in _OUTCOMES and o == owner for e, o in trail[i + 1:]):
            return True
    return False


def reconcile(
    conn: psycopg.Connection,
    report: Report,
    receipts: list[Receipt],
    killed_pids: list[int],
    stuck_after_seconds: float,
) -> None:
    """Fill in the delivery figures and record every broken guarantee in `report.problems`."""
    jobs = _load_jobs(conn, stuck_after_seconds)
    versions = _current_versions(conn)
    report.jobs = len(jobs)
    internal = _internal_ids(conn)
    by_job: dict[int, list[Receipt]] = defaultdict(list)
    for receipt in receipts:
        job_id = _job_of(receipt, internal)
        if job_id is None or job_id not in jobs:
            report.problems.append(f"mail with an unknown Message-ID: {receipt.message_id!r}")
            continue
        by_job[job_id].append(receipt)

    if report.jobs != report.accepted:
        report.problems.append(f"{report.accepted} requests accepted but {report.jobs} jobs queued")
    superseded = [j for j in jobs.values() if j.status == "superseded"]
    for job in superseded:
        if job.token_version >= versions[(job.user_id, job.purpose)]:
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
    versions = _current_versions(conn)
    jobs = {r[0]: r[1:] for r in conn.execute(
        "SELECT id, user_id, purpose, token_version FROM email_jobs WHERE purpose IS NOT NULL")}
    internal = _internal_ids(conn)
    stale: list[tuple[str, str]] = []
    current: dict[tuple[int, str], str] = {}
    for receipt in receipts:
        job_id = _job_of(receipt, internal)
        if job_id is None or receipt.token is None or job_id not in jobs:
            continue
        user_id, purpose, version = jobs[job_id]
        if version < versions[(user_id, purpose)]:
            stale.append((purpose, receipt.token))
        else:
            current[(user_id, purpose)] = receipt.token
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
