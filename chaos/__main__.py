"""`python -m chaos`: run the fault schedule, reconcile, print one `chaos:` line.

Exit status 0 only if every guarantee held: nothing lost or stuck, every
duplicate inside the crash-after-accept window (over HTTP with an
idempotency key: no duplicate at all), no stale link redeemed, no token or
password in any log, and the fault schedule actually ran.

`--transport smtp` (the default) sends to a faulty SMTP server and kills
workers at random moments; `--transport http` sends to a local provider fake
(`--provider`, chaos/provider.py: resend by default, brevo, postmark, ses,
sendgrid, mailgun, or `hook`, an app that delivers its own mail), which
injects 429s, 500s, stalls and dropped answers, and kills each victim after
accepting its message and before the worker could record it. With a key (or
the app's deduplication) no email may arrive twice; without one, duplicates
must stay within the crash window (kills, ambiguous and lost-lease sends).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from authsvc.apps.keys import register_app, set_delivery_url
from chaos.cluster import ThrowawayPostgres
from chaos.failover import FailoverPair
from chaos.fleet import MAX_BACKOFF_SECONDS, MAX_RESENDS_PER_KILL, Fleet
from chaos.life import SCENARIOS, Holder, LifeResult, check_owners, run_lives, seed_accounts
from chaos.load import ApiClient, LinkRequest, run_load
from chaos.provider import (
    DEDUPLICATED,
    FAKES,
    AcceptKiller,
    hook_figures,
    receipts,
    start_provider,
    wait_idle,
)
from chaos.reconcile import (
    NEW_PASSWORD,
    Report,
    check_redemptions,
    count_crash_window,
    reconcile,
)
from chaos.schedule import MAX_CRASHES, FaultSchedule
from chaos.smtp import FaultRates, FaultySmtp
from tools.local_hook import LocalHook

SECRET_KEY = "chaos-signing-key-" + "k" * 32


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kills", type=int, default=6, help="SIGKILLs of random workers")
    parser.add_argument("--kill-every", type=float, default=1.5, help="seconds between kills")
    parser.add_argument("--lease-seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=12, help="concurrent API clients")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second at most")
    parser.add_argument("--drain-timeout", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--logs", type=Path, default=None, help="keep process logs here")
    parser.add_argument("--transport", choices=("smtp", "http"), default="smtp",
                        help="a faulty SMTP server, or a local HTTP provider (--provider)")
    parser.add_argument("--provider", choices=sorted(FAKES), default="resend",
                        help="with --transport http: which provider's fake, or `hook`")
    parser.add_argument("--failover", action="store_true",
                        help="a primary and a streaming standby; promote the standby mid-run"
                             " instead of restarting one server")
    args = parser.parse_args(argv)
    if args.requests < 2 or args.workers < 1 or args.kills < 0:
        parser.error("need --requests >= 2, --workers >= 1, --kills >= 0")
    return args


def _environment(
    db_url: str, mail_url: str, data_dir: Path, lease_seconds: float
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTHSVC_")}
    env.update(
        AUTHSVC_ENV="test",
        AUTHSVC_DATABASE_URL=db_url,
        # No pooler in these runs: the same URL is the direct one, so workers LISTEN.
        AUTHSVC_DIRECT_DATABASE_URL=db_url,
        AUTHSVC_DATA_DIR=str(data_dir),
        AUTHSVC_SECRET_KEYS=SECRET_KEY,
        AUTHSVC_MAIL_URL=mail_url,
        AUTHSVC_MAIL_FROM="authsvc <no-reply@chaos.test>",
        AUTHSVC_LEASE_SECONDS=str(int(lease_seconds)),
        # The harness is one app calling hard; the per-app limit is not under test here.
        AUTHSVC_RATE_LIMIT_APP="100000000/1m",
    )
    return env


def _requests(count: int, rng: random.Random) -> tuple[list[str], list[LinkRequest]]:
    """Two requests per address (inside the 5/15m email limit), in random order."""
    emails = [f"chaos-{i}@chaos.test" for i in range((count + 1) // 2)]
    requests = [LinkRequest(emails[i // 2], rng.choice(["verify", "reset", "sign_in"]))
                for i in range(count)]
    rng.shuffle(requests)
    return emails, requests


def _drained(url: str) -> bool:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM email_jobs WHERE status = 'pending'"
            ).fetchone()
    except psycopg.OperationalError:
        return False  # mid-restart or mid-failover: not drained yet
    return row is not None and row[0] == 0


def run(args: argparse.Namespace) -> Report:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    print(f"chaos seed={seed}", file=sys.stderr)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="chaos-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    http = args.transport == "http"
    hook = http and args.provider == "hook"
    report = Report(requests=args.requests, transport=args.transport,
                    provider=args.provider if http else None)
    cluster: ThrowawayPostgres | FailoverPair = (
        FailoverPair() if args.failover else ThrowawayPostgres()
    )
    smtp = FaultySmtp(FaultRates(), seed)
    provider = start_provider(args.provider, seed) if http else None
    fleet: Fleet | None = None
    try:
        if not http:
            smtp.start()
        if hook:
            # The hook gets the emails of the app's own proven accounts: resets of
            # them, one per address, since a request racing another for the same
            # address is judged nobody's (outbox/producer.sql queue_link) and goes
            # through authsvc's transport, which here is null: a misrouted email
            # shows as lost.
            emails = [f"chaos-{i}@chaos.test" for i in range(args.requests)]
            requests = [LinkRequest(email, "reset") for email in emails]
        else:
            emails, requests = _requests(args.requests, rng)
        with psycopg.connect(cluster.url, autocommit=True) as conn, conn.transaction():
            conn.execute(
                "INSERT INTO users (email, password_hash, email_verified_at)"
                " SELECT unnest(%s::text[]), 'not-a-hash', CASE WHEN %s THEN now() END",
                (emails, hook),
            )
            # Mailbox holders changing, undoing and deleting beside the load
            # (chaos/life.py); over SMTP, where the links are read back.
            lives = 0 if http else max(len(SCENARIOS), args.requests // 50)
            life_ids = seed_accounts(conn, lives)
            app, api_key = register_app(conn, "chaos", ["http://127.0.0.1/"])
            if hook:
                assert isinstance(provider, LocalHook)
                conn.execute("INSERT INTO account_apps (user_id, app_id)"
                             " SELECT id, %s FROM users", (app.id,))
                provider.secret = set_delivery_url(conn, app.id, provider.url, [SECRET_KEY])
        if hook:
            mail_url = "null://"  # every email goes to the hook; one sent here would be lost
        else:
            mail_url = provider.mail_url if provider is not None else smtp.url
        env = _environment(cluster.url, mail_url, logs / "data", args.lease_seconds)
        fleet = Fleet(env, logs, args.workers, args.lease_seconds, seed)
        killer = AcceptKiller(fleet)
        if provider is not None:
            provider.on_accept = killer.on_accept
        fleet.start_api()
        fleet.start_workers()
        client = ApiClient(fleet.api_port, api_key)

        schedule = FaultSchedule(fleet, cluster, rng, kills=args.kills,
                                 kill_every=args.kill_every,
                                 kill=(lambda _rng: killer.arm()) if http else None)

        def progress(done: int) -> None:
            if done >= args.requests // 2:
                schedule.halfway.set()

        life = LifeResult()
        holder = Holder(ApiClient(fleet.api_port, api_key), smtp.snapshot, life)
        life_thread = threading.Thread(target=run_lives, name="life",
                                       args=(holder, life_ids, lives, rng))
        schedule.start()
        started = time.monotonic()
        life_thread.start()
        result = run_load(client, requests, args.concurrency, args.rate, progress)
        life_thread.join()
        schedule.load_done.set()
        report.accepted = result.accepted
        report.details.update(load_seconds=round(time.monotonic() - started, 1),
                              http_retries=result.retries, refused=result.refused[:10])
        if result.refused:
            report.problems.append(f"{len(result.refused)} requests refused: {result.refused[:5]}")
        schedule.join(timeout=args.drain_timeout)

        deadline = time.monotonic() + args.drain_timeout
        while time.monotonic() < deadline and not _drained(cluster.url):
            if not schedule.is_alive():
                schedule.supervise()
            if len(schedule.crashes) > MAX_CRASHES:
                report.problems.append(f"workers keep exiting by themselves: {schedule.crashes}")
                break
            time.sleep(0.25)
        crashes = schedule.crashes
        report.details.update(run_seconds=round(time.monotonic() - started, 1),
                              worker_crashes=crashes)
        if provider is not None:
            wait_idle(provider, 10.0)
            report.details.update(provider_faults=dict(provider.faults),
                                  provider_requests=len(provider.requests),
                                  provider_replays=provider.replays)
            if hook:
                figures = hook_figures(provider)
                report.details.update(hook=figures)
                report.unstable_ids = figures["unstable_ids"]
        else:
            report.details.update(smtp_faults=dict(smtp.faults))
        report.kills = len(fleet.killed_pids)
        if isinstance(cluster, FailoverPair):
            report.failovers = cluster.failovers
        else:
            report.db_restarts = cluster.restarts
        got = receipts(provider) if provider is not None else smtp.snapshot()
        with psycopg.connect(cluster.url, autocommit=True) as conn:
            reconcile(conn, report, got, fleet.killed_pids,
                      args.lease_seconds + MAX_BACKOFF_SECONDS, frozenset(life.deleted))
            report.stale_redemptions += life.stale_redemptions
            report.problems += life.problems + check_owners(conn, life)
            report.details.update(lives=dict(sorted(life.done.items())))
            if provider is not None:
                count_crash_window(conn, report, killer.killed_jobs,
                                   keyed=args.provider in DEDUPLICATED)
            check_redemptions(client, conn, report, got)
        fleet.stop()
        _scan_logs(logs, got, report)
    finally:
        if fleet is not None:
            fleet.stop()
        if provider is not None:
            provider.stop()
        else:
            smtp.stop()
        cluster.close()
    _judge(report, args)
    report.details["logs"] = str(logs)
    if isinstance(cluster, ThrowawayPostgres):  # what test_chaos checks was stopped
        report.details["cluster"] = str(cluster.root)
    return report


def _scan_logs(logs: Path, receipts: list, report: Report) -> None:
    """No link token and no password may appear in any process's log."""
    secrets = {r.token for r in receipts if r.token} | {NEW_PASSWORD, SECRET_KEY}
    for path in sorted(logs.glob("*.log")):
        text = path.read_text("utf-8", "replace")
        leaked = [s for s in secrets if s in text]
        if leaked:
            report.problems.append(f"{path.name} contains {len(leaked)} secret(s)")


def _judge(report: Report, args: argparse.Namespace) -> None:
    for name in ("lost", "stuck", "stale_redemptions"):
        if getattr(report, name):
            report.problems.append(f"{name}={getattr(report, name)}")
    if report.max_duplicates_per_kill > MAX_RESENDS_PER_KILL:
        report.problems.append(f"one kill caused {report.max_duplicates_per_kill} duplicates,"
                               f" more than the bound of {MAX_RESENDS_PER_KILL}")
    if report.kills < args.kills:
        report.problems.append(f"only {report.kills} of {args.kills} kills happened")
    if report.provider in DEDUPLICATED and report.duplicates:
        report.problems.append(f"duplicates={report.duplicates} despite the idempotency key"
                               " (or the app's deduplication)")
    if report.transport == "http" and report.duplicates > report.crash_window:
        report.problems.append(f"duplicates={report.duplicates} beyond the crash window"
                               f" ({report.crash_window})")
    if report.unstable_ids:
        report.problems.append(f"{report.unstable_ids} emails reached the app under more than"
                               " one webhook-id (or one id carried two emails)")
    if args.failover and report.failovers != 1:
        report.problems.append(f"failovers={report.failovers}, expected 1")
    if not args.failover and report.db_restarts != 1:
        report.problems.append(f"db_restarts={report.db_restarts}, expected 1")


def main(argv: list[str] | None = None) -> int:
    report = run(_arguments(argv))
    for key, value in report.details.items():
        print(f"  {key}: {value}", file=sys.stderr)
    for problem in report.problems:
        print(f"BROKEN: {problem}", file=sys.stderr)
    print(report.line(), flush=True)
    if report.transport == "http":
        return 1 if report.problems else 0
    print(f"chaos: most duplicates caused by one kill: {report.max_duplicates_per_kill}"
          f" (bound: --concurrency + --batch = {MAX_RESENDS_PER_KILL})", flush=True)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
