"""Addresses over their life under the same faults: changes, undos, deletions (SPEC §12).

Beside the link load, a few threads act as the holders of some mailboxes.
Each runs one scenario for one account through the API, reading its links
from the mail the faulty SMTP server accepted, while workers are killed and
the database restarts:

- `change`: a reset link is requested, the address is changed and confirmed
  (twice: the second answers token_used); the reset link must not redeem.
- `rechange`: two changes in a row; the first's link answers
  token_superseded, the second's confirms.
- `undo`: a change confirmed, then undone from the old address with a new
  password.
- `change_delete`: a change confirmed, then a deletion requested with the new
  address, which goes to the old one (its undo link lives) and is confirmed.
- `delete`: a deletion requested and confirmed.
- `taken`: a change to a confirmed stranger's address: 202, nothing changes.
- `squat`: a change to an unconfirmed stranger's address, confirmed: the
  stranger's account is retired.
- `race`: two concurrent confirms of one change link: exactly one 200.

`check_owners` then holds the database to what the mailbox holders proved:
every confirmed account owns only an address its holder proved for it, and
no deleted account's address is left in the outbox or its trails.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import psycopg

from authsvc.accounts.passwords import Passwords
from chaos.load import ApiClient
from chaos.smtp import Receipt

LIFE_PASSWORD = "chaos-life-passphrase-17"  # noqa: S105  (the life accounts' password)
UNDO_PASSWORD = "chaos-undone-passphrase-23"  # noqa: S105
SCENARIOS = ("change", "rechange", "undo", "change_delete", "delete", "taken", "squat", "race")
MAIL_WAIT_SECONDS = 150.0  # a kill, a lease to expire and the longest backoff, with room


@dataclass
class LifeResult:
    """What the mailbox holders did, and what the database must now show."""

    # address -> the account id that must own it, confirmed; None: nobody confirmed.
    owners: dict[str, int | None] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)  # addresses of deleted accounts
    done: dict[str, int] = field(default_factory=dict)  # scenario -> completed runs
    stale_redemptions: int = 0
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)


def seed_accounts(conn: psycopg.Connection, count: int) -> dict[str, int]:
    """`count` confirmed life accounts, and as many confirmed and unconfirmed strangers.

    One production-strength hash serves every account: each check of it
    costs what a real sign-in costs.
    """
    password_hash = Passwords().hash(LIFE_PASSWORD)
    rows: dict[str, int] = {}
    for prefix, confirmed in (("life", True), ("owner", True), ("squat", False)):
        emails = [f"{prefix}-{i}@life.chaos.test" for i in range(count)]
        for email, user_id in conn.execute(
            "INSERT INTO users (email, password_hash, email_verified_at)"
            " SELECT unnest(%s::text[]), %s, CASE WHEN %s THEN now() END RETURNING email, id",
            (emails, password_hash, confirmed),
        ):
            rows[email] = user_id
    return rows


class Holder:
    """The holder of every life mailbox: calls the API and reads its mail."""

    def __init__(self, client: ApiClient, mail: Callable[[], list[Receipt]],
                 result: LifeResult) -> None:
        self.client = client
        self.mail = mail
        self.result = result

    def post(self, path: str, body: dict[str, object]) -> tuple[int, dict]:
        """The final answer: a retry after a dropped answer or a 5xx gets the first
        outcome under its Idempotency-Key instead of acting twice."""
        status, reply, _tries = self.client.post_until_final(
            "/api/v1" + path, body, f"life-{uuid.uuid4()}")
        return status, reply

    def expect(self, path: str, body: dict[str, object], status: int, what: str) -> dict:
        got, reply = self.post(path, body)
        if got != status:
            self.result.problem(f"{what}: {path} answered {got} {reply.get('code', reply)}")
        return reply

    def link(self, to: str, path: str, after: float) -> str | None:
        """The token of the first email to `to` with a link to `path`, sent after `after`."""
        deadline = time.monotonic() + MAIL_WAIT_SECONDS
        while time.monotonic() < deadline:
            for receipt in self.mail():
                if (receipt.recipient == to and receipt.link_path == path
                        and receipt.received_at >= after and receipt.token):
                    return receipt.token
            time.sleep(0.2)
        self.result.problem(f"no {path} link reached {to} in {MAIL_WAIT_SECONDS:.0f} s")
        return None

    def delete(self, email: str, confirmed_at: str) -> bool:
        """Ask to delete the account `email` opens, and confirm it with the link that
        reaches `confirmed_at`; whether it answered as deleted."""
        asked = time.time() - 1.0
        self.expect("/account-deletions", {"email": email, "password": LIFE_PASSWORD},
                    202, f"deletion of {email}")
        token = self.link(confirmed_at, "/account/delete", asked)
        if token is None:
            return False
        reply = self.expect("/account-deletions/confirm", {"token": token}, 200,
                            f"deletion of {email}")
        return reply.get("deleted") is True

    def change(self, email: str, new_email: str) -> str | None:
        """Request a change and return its link's token, as the new mailbox got it."""
        asked = time.time() - 1.0  # the SMTP server's clock, with room for its rounding
        self.expect("/email-changes",
                    {"email": email, "password": LIFE_PASSWORD, "new_email": new_email},
                    202, f"change {email} -> {new_email}")
        return self.link(new_email, "/email-change/confirm", asked)

    def confirm_change(self, token: str, email: str, new_email: str) -> bool:
        reply = self.expect("/email-changes/confirm", {"token": token}, 200,
                            f"confirm {email} -> {new_email}")
        return reply.get("email") == new_email


def run_scenario(holder: Holder, scenario: str, index: int, ids: dict[str, int]) -> None:
    """One scenario for account `life-{index}`; what it proved goes to `holder.result`."""
    result = holder.result
    email = f"life-{index}@life.chaos.test"
    moved = f"moved-{index}@life.chaos.test"
    user_id = ids[email]
    owners: dict[str, int | None] = {email: user_id}

    if scenario in ("change", "undo", "change_delete", "rechange", "race"):
        reset_token = None
        if scenario == "change":
            asked = time.time() - 1.0
            holder.expect("/password-resets", {"email": email}, 202, f"reset {email}")
            reset_token = holder.link(email, "/reset/confirm", asked)
        if scenario == "rechange":
            owners[f"first-{index}@life.chaos.test"] = None
            first = holder.change(email, f"first-{index}@life.chaos.test")
            token = holder.change(email, moved)
            if first:
                got, reply = holder.post("/email-changes/confirm", {"token": first})
                if got == 200:
                    with result.lock:
                        result.stale_redemptions += 1
                elif reply.get("code") != "token_superseded":
                    result.problem(f"superseded change link of {email}: {got} {reply}")
        else:
            token = holder.change(email, moved)
        if token is None:
            return
        confirmed_at = time.time() - 1.0
        if scenario == "race":
            with ThreadPoolExecutor(2) as pool:
                answers = list(pool.map(
                    lambda _: holder.post("/email-changes/confirm", {"token": token}), range(2)))
            if sorted(a[0] for a in answers) != [200, 410]:
                result.problem(f"two confirms of one link for {email}: {answers}")
        else:
            if not holder.confirm_change(token, email, moved):
                return
            again, reply = holder.post("/email-changes/confirm", {"token": token})
            if again != 410 or reply.get("code") != "token_used":
                result.problem(f"a used change link of {email} answered {again} {reply}")
        owners.update({email: None, moved: user_id})
        if reset_token is not None:
            got, reply = holder.post("/password-resets/confirm",
                                     {"token": reset_token, "password": UNDO_PASSWORD})
            if got < 400:
                with result.lock:
                    result.stale_redemptions += 1
        if scenario == "undo":
            undo = holder.link(email, "/email-change/undo", confirmed_at)
            if undo is None:
                return
            reply = holder.expect("/email-changes/undo",
                                  {"token": undo, "password": UNDO_PASSWORD}, 200,
                                  f"undo of {email}")
            if reply.get("email") == email:
                owners = {email: user_id, moved: None}
        # While the undo link lives, the deletion is confirmed at the old address.
        if scenario == "change_delete":
            if not holder.delete(moved, confirmed_at=email):
                return
            owners = {email: None, moved: None}
            with result.lock:
                result.deleted |= {email, moved}
    elif scenario == "delete":
        if not holder.delete(email, confirmed_at=email):
            return
        owners = {email: None}
        with result.lock:
            result.deleted.add(email)
    elif scenario == "taken":
        stranger = f"owner-{index}@life.chaos.test"
        holder.expect("/email-changes",
                      {"email": email, "password": LIFE_PASSWORD, "new_email": stranger},
                      202, f"change {email} -> {stranger}")
        owners[stranger] = ids[stranger]
    elif scenario == "squat":
        squatter = f"squat-{index}@life.chaos.test"
        token = holder.change(email, squatter)
        if token is None or not holder.confirm_change(token, email, squatter):
            return
        owners = {email: None, squatter: user_id}
    with result.lock:
        result.owners.update(owners)
        result.done[scenario] = result.done.get(scenario, 0) + 1


def run_lives(holder: Holder, ids: dict[str, int], count: int, rng: random.Random) -> None:
    """One scenario per life account, in turn through the list, a few at a time."""
    plan = [(SCENARIOS[i % len(SCENARIOS)], i) for i in range(count)]
    rng.shuffle(plan)

    def one(item: tuple[str, int]) -> None:
        scenario, index = item
        try:
            run_scenario(holder, scenario, index, ids)
        except Exception as exc:  # a broken scenario is a finding, not a crash
            holder.result.problem(f"{scenario} of life-{index}: {type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(one, plan))


def check_owners(conn: psycopg.Connection, result: LifeResult) -> list[str]:
    """Every confirmed holder of a life address is the one its mailbox holder proved."""
    problems: list[str] = []
    confirmed: dict[str, int] = dict(conn.execute(
        "SELECT email, id FROM users WHERE email LIKE '%%@life.chaos.test'"
        " AND email_verified_at IS NOT NULL").fetchall())
    for address, owner in sorted(result.owners.items()):
        if confirmed.get(address) != owner:
            problems.append(f"{address} is owned by {confirmed.get(address)}, expected {owner}")
    proven = {a for a, owner in result.owners.items() if owner is not None}
    # Accounts no scenario touched keep their seeded address; none may own another.
    for address, user_id in confirmed.items():
        if address not in result.owners and not address.startswith(("life-", "owner-")):
            problems.append(f"{address} is owned by {user_id}, which no mailbox proved")
        if address in result.owners and address not in proven:
            problems.append(f"{address} is owned by {user_id} after its holder gave it up")
    squatters = conn.execute(
        "SELECT email FROM users WHERE email = ANY (%s) AND email_verified_at IS NULL",
        ([a for a, owner in result.owners.items() if owner is not None],)).fetchall()
    if squatters:
        problems.append(f"unconfirmed accounts still hold proven addresses: {squatters[:5]}")
    for address in sorted(result.deleted):
        left = conn.execute(
            "SELECT (SELECT count(*) FROM users WHERE email = %(a)s)"
            " + (SELECT count(*) FROM email_jobs WHERE recipient = %(a)s"
            "    OR strpos(payload::text, %(a)s) > 0 OR strpos(last_error, %(a)s) > 0)"
            " + (SELECT count(*) FROM email_job_events WHERE strpos(error, %(a)s) > 0)",
            {"a": address}).fetchone()
        if left and left[0]:
            problems.append(f"deleted address {address} is still in {left[0]} rows")
    return problems
