"""Three business rules kept as PL/pgSQL functions, timed beside the plain statements Python
would issue for them.

The rules (migrations/schema.sql, the functions' last definitions):

  1. count: rate_limit_hit (0015) adds one hit to the bucket's fixed window
     and answers "within the limit?". With wait_for_disk false its commit
     does not wait for the WAL flush (a form's IP count, an API key's count),
     with true it does (the login count).
  2. code tries: an address's tries at its code start afresh (0016's
     code_attempts_forget_unissued). Since 0020 this is the DELETE inside
     email_budget_hit, with no function of its own, so 0016's shape is timed
     as a function made for the bench in its throwaway database.
  3. email budget: email_budget_hit (0018, 0020) counts an email against the
     address's budget and, within it, forgets the address's tries. Every
     signup runs it once (code_tries.count_email) and so does every link request
     (inside queue_link).

The statements form of a rule is what its caller would run instead: the
same semantics and the same answer, in as few statements as honestly
possible, in the transaction the caller runs it in. A count is its own
transaction, so its commit is timed. The tries and the budget run inside
the signup's transaction, so only the rule's statements are timed, between a
BEGIN and a COMMIT that both forms pay alike.

The bench times every form over TCP to the server at --url, in three ways:
direct with psycopg's preparing (a direct pool), direct without it (every
pooled URL: authsvc/db.py POOLER_SAFE), and through PgBouncer in transaction
mode when it is installed (`make pgbouncer`). Each round runs every form
once, in a shuffled order, so a noisy moment slows all of them; the three
ways take turns in five passes. Before timing, the bench asserts that every
form gives the same decisions, leaves the same rows and waits for the disk
as its function does, for one sequence of calls.

Last, the share of a signup: a form's POST (the IP count, then
actions.sign_up), as shipped and with both of its rules as statements
(code_tries.count_email is swapped in this process only). It is timed once with
argon2 as production hashes and once with the tests' cheap hasher, which
leaves the database work.

Run:  .venv/bin/python -m bench.rules_in_plpgsql [--url postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock
from urllib.parse import urlsplit

import psycopg

from authsvc import ratelimit
from authsvc.accounts import actions, code_tries
from authsvc.accounts.passwords import Passwords, cheap_passwords
from authsvc.config import RateLimit, load_settings
from authsvc.db.connections import POOLER_SAFE, Conn, create_pool
from authsvc.ratelimit import Decision, RateLimitHit
from authsvc.services import Services, build_services
from bench.common import fresh_database, percentile
from chaos.servers import PgBouncer

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
ROUNDS = 1500  # per form and path, in PASSES passes
PASSES = 5  # each path in turn, so a noisy minute is shared by all three
WARM_ROUNDS = 10  # per pass, not kept: plans, psycopg's preparing, caches
KEYS = 64  # buckets (and addresses) each form cycles through
SIGNUPS = 100  # per form and path with argon2; five times as many with the cheap hasher
PASSWORD = "bench passphrase 7431"

# The statements Python would issue. The count is one upsert; its answer
# is the same comparison rate_limit_hit makes.
COUNT = """
INSERT INTO rate_limit_counters AS c (bucket, window_start, hits)
VALUES (%(bucket)s, %(window_start)s, 1)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
RETURNING c.hits <= %(limit)s"""

# The count without the disk wait in one statement: set_config in FROM turns
# off synchronous_commit for this statement's own transaction, before the row
# is counted, as rate_limit_hit does on its first line.
COUNT_NO_WAIT_IN_ONE = """
INSERT INTO rate_limit_counters AS c (bucket, window_start, hits)
SELECT %(bucket)s, %(window_start)s, 1 FROM set_config('synchronous_commit', 'off', true)
ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
RETURNING c.hits <= %(limit)s"""

FORGET_TRIES = ("DELETE FROM code_attempts"
                " WHERE purpose = %(purpose)s AND address_digest = %(digest)s")

# The budget in one statement, the CTEs queue_link had before 0018. Its
# DELETE sees the statement's snapshot, where the function's and a second
# statement's take a new one; nothing in one session can tell them apart.
BUDGET_IN_ONE = """
WITH counted AS (
    INSERT INTO rate_limit_counters AS c (bucket, window_start, hits)
    VALUES (%(bucket)s, %(window_start)s, 1)
    ON CONFLICT (bucket, window_start) DO UPDATE SET hits = c.hits + 1
    RETURNING c.hits <= %(limit)s AS allowed
), forgotten AS (
    DELETE FROM code_attempts
    WHERE purpose = %(purpose)s AND address_digest = %(digest)s
      AND (SELECT allowed FROM counted)
)
SELECT allowed FROM counted"""

# 0016's shape on 0020's table. It exists only in the bench's throwaway database.
TRIES_FUNCTION = """
CREATE FUNCTION bench_code_tries_forget(tries_purpose text, tries_digest bytea)
RETURNS void LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    DELETE FROM code_attempts WHERE purpose = tries_purpose AND address_digest = tries_digest;
END $$"""

SEED_TRIES = """
INSERT INTO code_attempts (purpose, address_digest, attempts, created_at)
VALUES (%(purpose)s, %(digest)s, %(attempts)s, now())
ON CONFLICT (purpose, address_digest) DO UPDATE SET attempts = EXCLUDED.attempts"""

Params = dict[str, object]


def _answer(conn: Conn, query: str, params: Params) -> bool:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return bool(row[0])


# Each form takes the rule's arguments and returns its decision (the tries
# rule decides nothing: True).

def count_function(wait: bool) -> Callable[[Conn, Params], bool]:
    def call(conn: Conn, p: Params) -> bool:
        return _answer(conn, ratelimit.Q["hit"], {**p, "wait_for_disk": wait})
    return call


def count_statement(conn: Conn, p: Params) -> bool:
    return _answer(conn, COUNT, p)


def count_no_wait_in_transaction(conn: Conn, p: Params) -> bool:
    # The readable way: SET LOCAL keeps the setting to this transaction.
    with conn.transaction():
        conn.execute("SET LOCAL synchronous_commit = off")
        return _answer(conn, COUNT, p)


def count_no_wait_in_one(conn: Conn, p: Params) -> bool:
    return _answer(conn, COUNT_NO_WAIT_IN_ONE, p)


def tries_function(conn: Conn, p: Params) -> bool:
    conn.execute("SELECT bench_code_tries_forget(%(purpose)s, %(digest)s)", p)
    return True


def tries_statement(conn: Conn, p: Params) -> bool:
    conn.execute(FORGET_TRIES, p)
    return True


def budget_function(conn: Conn, p: Params) -> bool:
    return _answer(conn, code_tries.Q["email_budget_hit"], p)


def budget_statements(conn: Conn, p: Params) -> bool:
    allowed = _answer(conn, COUNT, p)
    if allowed:
        conn.execute(FORGET_TRIES, p)
    return allowed


def budget_in_one(conn: Conn, p: Params) -> bool:
    return _answer(conn, BUDGET_IN_ONE, p)


@dataclass(frozen=True)
class Form:
    name: str
    round_trips: int
    call: Callable[[Conn, Params], bool]


@dataclass(frozen=True)
class Rule:
    key: str
    label: str
    in_callers_transaction: bool  # else its own transaction, commit timed
    limit: int  # for the timing; the check uses its own
    forms: tuple[Form, ...]  # today's function first


def _select_one(conn: Conn, p: Params) -> bool:
    return _answer(conn, "SELECT true", {})


BUDGET_FORMS = (
    Form("email_budget_hit()", 1, budget_function),
    Form("count, then DELETE if within", 2, budget_statements),
    Form("one statement (CTEs)", 1, budget_in_one),
)
RULES = (
    Rule("rt", "one round trip (SELECT true)", False, 0, (Form("SELECT true", 1, _select_one),)),
    Rule("count_wait", "1. count, commit waits for disk (login)", False, 10**9, (
        Form("rate_limit_hit(.., true)", 1, count_function(True)),
        Form("INSERT .. ON CONFLICT", 1, count_statement),
    )),
    Rule("count_no_wait", "1. count, no disk wait (form IP, API key)", False, 10**9, (
        Form("rate_limit_hit(.., false)", 1, count_function(False)),
        Form("BEGIN; SET LOCAL; INSERT; COMMIT", 4, count_no_wait_in_transaction),
        Form("one INSERT, set_config in FROM", 1, count_no_wait_in_one),
    )),
    Rule("tries", "2. code tries afresh (0016's shape)", True, 0, (
        Form("function (bench-only)", 1, tries_function),
        Form("DELETE", 1, tries_statement),
    )),
    Rule("budget_within", "3. email budget, within (signup)", True, 10**9, BUDGET_FORMS),
    Rule("budget_over", "3. email budget, over it", True, 0, (
        BUDGET_FORMS[0], Form("count (no DELETE: over)", 1, budget_statements), BUDGET_FORMS[2],
    )),
)


def _digest(name: str) -> bytes:
    return hashlib.sha256(name.encode()).digest()


def _params(bucket: str, window_start: datetime, limit: int, purpose: str,
            digest: bytes) -> Params:
    return {"bucket": bucket, "window_start": window_start, "limit": limit,
            "purpose": purpose, "digest": digest}


def _seed(conn: Conn, digest: bytes, tries: dict[str, int]) -> None:
    for purpose, attempts in tries.items():
        conn.execute(SEED_TRIES, {"purpose": purpose, "digest": digest, "attempts": attempts})


# --- the same answers ------------------------------------------------------------------------

W1 = datetime(2030, 1, 1, tzinfo=UTC)
W2 = W1 + timedelta(minutes=15)
# (window, tries seeded first, purpose); limit 2. Over the budget nothing but
# the count changes; a new window is within again.
STEPS: tuple[tuple[datetime, dict[str, int], str], ...] = (
    (W1, {"verify": 3, "reset": 2}, "verify"),
    (W1, {"verify": 4}, "verify"),
    (W1, {"verify": 1}, "verify"),
    (W1, {}, "reset"),
    (W2, {}, "verify"),
)
Trace = list[tuple[bool, int, dict[str, int]]]  # decision, hits in the window, tries left
_COUNTS: Trace = [(True, 1, {"verify": 3, "reset": 2}), (True, 2, {"verify": 4, "reset": 2}),
                  (False, 3, {"verify": 1, "reset": 2}), (False, 4, {"verify": 1, "reset": 2}),
                  (True, 1, {"verify": 1, "reset": 2})]
EXPECTED: dict[str, Trace] = {
    "count_wait": _COUNTS,
    "count_no_wait": _COUNTS,
    "tries": [(True, 0, {"reset": 2}), (True, 0, {"reset": 2}), (True, 0, {"reset": 2}),
              (True, 0, {}), (True, 0, {})],
    "budget_within": [(True, 1, {"reset": 2}), (True, 2, {"reset": 2}),
                      (False, 3, {"verify": 1, "reset": 2}),
                      (False, 4, {"verify": 1, "reset": 2}), (True, 1, {"reset": 2})],
}
EXPECTED["budget_over"] = EXPECTED["budget_within"]


def _trace(conn: Conn, rule: Rule, form: Form, name: str) -> Trace:
    digest = _digest(name)
    trace: Trace = []
    for window, seed, purpose in STEPS:
        _seed(conn, digest, seed)
        p = _params(name, window, 2, purpose, digest)
        if rule.in_callers_transaction:
            with conn.transaction():
                decision = form.call(conn, p)
        else:
            decision = form.call(conn, p)
        # Neither form leaves synchronous_commit off for the session's later work.
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",), form.name
        row = conn.execute("SELECT hits FROM rate_limit_counters"
                           " WHERE bucket = %s AND window_start = %s", (name, window)).fetchone()
        tries: dict[str, int] = dict(conn.execute(
            "SELECT purpose, attempts FROM code_attempts WHERE address_digest = %s",
            (digest,)).fetchall())
        trace.append((decision, row[0] if row else 0, tries))
    return trace


def _skips_disk_wait(conn: Conn, form: Form) -> bool:
    """Whether the form's transaction would commit without waiting for the WAL flush."""
    with conn.transaction(force_rollback=True):  # a SET LOCAL inside lasts until the end
        form.call(conn, _params("check:setting", W1, 2, "verify", _digest("check:setting")))
        return conn.execute("SHOW synchronous_commit").fetchone() == ("off",)


def check_same_answers(conn: Conn, tag: str) -> None:
    """Every form gives the rule's decisions, leaves its rows and waits for the disk as its
    function does, or the bench stops."""
    for rule in RULES:
        if rule.key not in EXPECTED:
            continue
        for form in rule.forms:
            got = _trace(conn, rule, form, f"check:{tag}:{rule.key}:{form.name}")
            assert got == EXPECTED[rule.key], (rule.key, form.name, got)
            assert _skips_disk_wait(conn, form) == (rule.key == "count_no_wait"), form.name


# --- timing ----------------------------------------------------------------------------------

Samples = dict[tuple[str, str], list[float]]


def _time_once(conn: Conn, rule: Rule, form: Form, index: int, now: datetime) -> float:
    """One call in microseconds, on one of the form's KEYS buckets in the current window."""
    key = f"{rule.key}:{form.name}:{index % KEYS}"
    counted = ratelimit.hit_for("bench", key, RateLimit(max(rule.limit, 1), 900), now)
    p = _params(counted.bucket, counted.window_start, rule.limit, "verify", _digest(key))
    if not rule.in_callers_transaction:
        began = time.perf_counter()
        form.call(conn, p)
        return (time.perf_counter() - began) * 1e6
    with conn.transaction():
        _seed(conn, _digest(key), {"verify": 3})  # the tries the rule forgets
        began = time.perf_counter()
        form.call(conn, p)
        return (time.perf_counter() - began) * 1e6


def time_forms(conn: Conn, rounds: int, shuffler: random.Random, samples: Samples) -> None:
    """`rounds` rounds, each form once per round in a new order, after a few not kept."""
    order = [(rule, form) for rule in RULES for form in rule.forms]
    # What autovacuum would have done since the last pass.
    conn.execute("VACUUM rate_limit_counters, code_attempts")
    for index in range(-WARM_ROUNDS, rounds):
        shuffler.shuffle(order)
        now = datetime.now(UTC)
        for rule, form in order:
            took = _time_once(conn, rule, form, index, now)
            if index >= 0:
                samples.setdefault((rule.key, form.name), []).append(took)


# --- a whole signup --------------------------------------------------------------------------

SWAPPED = Counter[str]()  # calls of the swapped-in count_email: the swap did happen


def count_email_in_statements(conn: Conn, budget: RateLimitHit, email: str,
                              purpose: str) -> Decision:
    """code_tries.count_email with the budget as statements (budget_statements)."""
    SWAPPED[email] += 1
    p = {**budget.params(), "purpose": purpose, "digest": code_tries.address_digest(email)}
    return budget.decision(budget_statements(conn, p))


def _form_post(conn: Conn, svc: Services, email: str, ip: str,
               statements: bool) -> tuple[float, float]:
    """The database side of a signup form's POST (the IP count, sign_up), in microseconds,
    and the part of it its two rules took (the whole is too noisy to show their Δ alone)."""
    limit = svc.settings.rate_limit_ip
    count_email = count_email_in_statements if statements else code_tries.count_email
    spent: list[float] = []

    def timed_count_email(conn: Conn, budget: RateLimitHit, email: str,
                          purpose: str) -> Decision:
        began = time.perf_counter()
        decision = count_email(conn, budget, email, purpose)
        spent.append((time.perf_counter() - began) * 1e6)
        return decision

    with mock.patch.object(code_tries, "count_email", timed_count_email):
        began = time.perf_counter()
        if statements:
            count_no_wait_in_transaction(
                conn, ratelimit.hit_for("ip", ip, limit, svc.clock()).params())
        else:
            ratelimit.hit(conn, "ip", ip, limit, svc.clock(), wait_for_disk=False)
        counted = time.perf_counter()
        actions.sign_up(conn, svc, email=email, password=PASSWORD)
        ended = time.perf_counter()
    [budget] = spent
    return (ended - began) * 1e6, (counted - began) * 1e6 + budget


SignupSamples = dict[str, dict[str, list[float]]]  # form -> "post" or "rules" -> µs


def time_signups(conn: Conn, svc: Services, count: int, tag: str, shuffler: random.Random,
                 samples: SignupSamples) -> None:
    for form in ("function", "statements"):
        samples.setdefault(form, {"post": [], "rules": []})
    for index in range(-3, count):
        forms = list(samples)
        shuffler.shuffle(forms)
        for form in forms:
            email = f"{tag}-{form}-{index}@example.com"
            post, rules = _form_post(conn, svc, email, f"198.51.100.{index % 20}",
                                     form == "statements")
            if index >= 0:
                samples[form]["post"].append(post)
                samples[form]["rules"].append(rules)
    assert all(SWAPPED[f"{tag}-statements-{i}@example.com"] == 1 for i in range(-3, count))
    for form in samples:
        # Both forms did a signup's whole work: a new account and its link queued.
        queued = conn.execute("SELECT count(*) FROM email_jobs WHERE template = 'verify'"
                              " AND recipient LIKE %s", (f"{tag}-{form}-%",)).fetchone()
        assert queued == (count + 3,), (form, queued)


# --- the run ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Route:
    name: str
    about: str
    url: str
    prepare: bool


@contextmanager
def _bouncer(url: str, wanted: bool) -> Iterator[PgBouncer | None]:
    if not wanted or not (shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists()):
        yield None
        return
    parts = urlsplit(url)
    bouncer = PgBouncer(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        yield bouncer
    finally:
        bouncer.close()


def _connect(path: Route) -> Conn:
    return psycopg.connect(path.url, autocommit=True, **({} if path.prepare else POOLER_SAFE))


@dataclass
class PathResult:
    path: Route
    samples: Samples
    signups: dict[str, SignupSamples]  # by hasher


def run(base: str, rounds: int, signups: int, pgbouncer: bool, passes: int,
        seed: int) -> list[PathResult]:
    with fresh_database(base) as url, _bouncer(base, pgbouncer) as bouncer, \
            tempfile.TemporaryDirectory(prefix="authsvc-bench-") as data:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(TRIES_FUNCTION)
        paths = [Route("direct", "direct TCP, prepared after 5 runs (a direct pool)", url, True),
                 Route("direct, unprepared",
                       "direct TCP, unprepared (POOLER_SAFE: every pooled URL)", url, False)]
        if bouncer is not None:
            dbname = urlsplit(url).path.lstrip("/")
            paths.append(Route("PgBouncer", "PgBouncer on 127.0.0.1, transaction mode, unprepared",
                               bouncer.url(dbname), False))
        results = [PathResult(path, {}, {}) for path in paths]
        settings = load_settings({
            "AUTHSVC_ENV": "test", "AUTHSVC_DATABASE_URL": url, "AUTHSVC_DATA_DIR": data,
            "AUTHSVC_SECRET_KEYS": "bench-secret-key-0123456789abcdef-0123456789"})
        hashers = {"argon2 (production)": Passwords(), "cheap (database work)": cheap_passwords()}
        pool = create_pool(url, min_size=1, max_size=1, check=False)  # sign_up takes a conn
        shuffler = random.Random(seed)
        try:
            for number in range(passes):
                print(f"pass {number + 1}/{passes} …", flush=True)
                for result in results[number % len(results):] + results[:number % len(results)]:
                    with _connect(result.path) as conn:
                        if number == 0:
                            check_same_answers(conn, result.path.name)
                        time_forms(conn, rounds // passes, shuffler, result.samples)
                        for hasher, passwords in hashers.items():
                            svc = build_services(settings, pool, passwords=passwords)
                            many = (1 if hasher.startswith("argon2") else 5) * signups // passes
                            tag = f"p{results.index(result)}-{number}-{hasher[:5]}"
                            time_signups(conn, svc, many, tag,
                                         shuffler, result.signups.setdefault(hasher, {}))
        finally:
            pool.close()
    return results


# --- the table -------------------------------------------------------------------------------

def _p50(values: list[float]) -> float:
    return statistics.median(values)


def _p95(values: list[float]) -> float:
    return percentile(values, 0.95)


def table(results: list[PathResult], rounds: int, server: str) -> str:
    lines = [f"PostgreSQL {server}; µs per call, {rounds:,} calls per form and path,"
             " forms interleaved in a shuffled order each round.", ""]
    for result in results:
        lines += [result.path.about, "",
                  "| rule (caller) | form | round trips | median | p95 | ratio to function"
                  " (median) | Δ median |",
                  "|---|---|---|---|---|---|---|"]
        for rule in RULES:
            base = _p50(result.samples[(rule.key, rule.forms[0].name)])
            for number, form in enumerate(rule.forms):
                values = result.samples[(rule.key, form.name)]
                ratio = f"{_p50(values) / base:.2f}" if number else "1.00"
                delta = f"{_p50(values) - base:+.0f}" if number else ""
                lines.append(f"| {rule.label if number == 0 else ''} | {form.name} |"
                             f" {form.round_trips} | {_p50(values):.0f} | {_p95(values):.0f} |"
                             f" {ratio} | {delta} |")
        lines.append("")
    lines += [
        "A signup form's POST, database side (the IP count, then actions.sign_up), µs,"
        " median (p95); 'rules': the IP count and count_email within it. Δ: rules as"
        " statements minus as functions; share: Δ rules over the POST with functions.", "",
        "| path | hasher | POST, functions | POST, statements | Δ POST | rules, functions |"
        " rules, statements | Δ rules | share |",
        "|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        for hasher, samples in result.signups.items():
            fn, st = samples["function"], samples["statements"]
            post = _p50(fn["post"])
            rules = _p50(st["rules"]) - _p50(fn["rules"])
            lines.append(
                f"| {result.path.name} | {hasher} | {post:,.0f} ({_p95(fn['post']):,.0f}) |"
                f" {_p50(st['post']):,.0f} ({_p95(st['post']):,.0f}) |"
                f" {_p50(st['post']) - post:+,.0f} | {_p50(fn['rules']):,.0f} |"
                f" {_p50(st['rules']):,.0f} | {rules:+,.0f} | {rules / post:+.1%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rules_in_plpgsql",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=DEFAULT_URL,
                        help="a server to create the throwaway database on (over TCP)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--signups", type=int, default=SIGNUPS)
    parser.add_argument("--no-pgbouncer", action="store_true")
    parser.add_argument("--passes", type=int, default=PASSES)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with psycopg.connect(args.url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version')").fetchone()
    results = run(args.url, args.rounds, args.signups, not args.no_pgbouncer, args.passes,
                  args.seed)
    print(table(results, (args.rounds // args.passes) * args.passes,
                f"{row[0] if row else '?'} at {urlsplit(args.url).netloc}"))


if __name__ == "__main__":
    main()
