"""The console's actions: one function each, one transaction each, its log entry inside it.

A job's trail names the operator by account id, not address: trails outlive
accounts, and an address must not (SPEC §12).

Each takes the acting operator (`Actor`) and writes the operator log in the
same `conn.transaction()` as the change, so the log holds exactly the
actions that happened. Returns False (or None) when there was nothing to do;
the caller says so.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts import actions as account_actions
from authsvc.accounts import deletion, sessions, users
from authsvc.accounts.addresses import masked
from authsvc.apps import keys
from authsvc.bounces import suppressions
from authsvc.db.queries import load_queries
from authsvc.operators.log import Actor, write_entry
from authsvc.outbox import admin
from authsvc.services import Services

Q = load_queries(Path(__file__).with_suffix(".sql"))


class NotRedrivable(Exception):
    """The job is not failed, or its link was replaced since (a redrive would send a dead link)."""


def redrive_job(conn: Connection, svc: Services, actor: Actor, job_id: int) -> None:
    """A failed job queued again with fresh attempts, if its link is still current."""
    with conn.transaction():
        current = conn.execute(Q["job_link_current"], {"job_id": job_id}).fetchone()
        if current is None or not current[0]:
            reason = "its link was replaced by a newer one" if current else "no such job"
            raise NotRedrivable(reason)
        if not admin.redrive_job(conn, job_id, note=f"redriven by operator {actor.user_id}"):
            raise NotRedrivable("only failed jobs are redriven")
        write_entry(conn, actor, "job.redrive", f"job {job_id}", svc.clock())


class NotCancellable(Exception):
    """Only a failed job, or a pending one no worker is sending, can be cancelled."""


def cancel_job(conn: Connection, svc: Services, actor: Actor, job_id: int) -> None:
    """Stop a pending or failed job for good: it is never sent, and no redrive brings it back."""
    with conn.transaction():
        if not admin.cancel_job(conn, job_id, note=f"cancelled by operator {actor.user_id}"):
            found = admin.find_job(conn, job_id)
            if found is None:
                raise NotCancellable("no such job")
            if found.status == "pending":
                raise NotCancellable("a worker is sending it right now; try again in a moment")
            raise NotCancellable(f"it is {found.status}; only pending or failed jobs are cancelled")
        write_entry(conn, actor, "job.cancel", f"job {job_id}", svc.clock())


def end_sessions(conn: Connection, svc: Services, actor: Actor, user_id: int) -> int:
    """End every web session of the account; how many there were."""
    with conn.transaction():
        ended = sessions.end_all_sessions(conn, user_id)
        write_entry(conn, actor, "account.end_sessions", f"account {user_id}", svc.clock(),
                    f"{ended} session(s)")
    return ended


def send_reset(conn: Connection, svc: Services, actor: Actor, user_id: int) -> bool:
    """Queue a password reset to the account's address; False if its email budget held it back."""
    with conn.transaction():
        user = users.find_user_by_id(conn, user_id)
        if user is None:
            return False
        queued = account_actions.request_password_reset(conn, svc, email=user.email)
        write_entry(conn, actor, "account.send_reset", f"account {user_id}", svc.clock(),
                    "queued" if queued else "held back by the address's email limit")
    return queued


def lift_lockout(conn: Connection, svc: Services, actor: Actor, user_id: int) -> bool:
    """Forget the account's failed logins, so its owner may log in again now."""
    with conn.transaction():
        user = users.find_user_by_id(conn, user_id)
        if user is None:
            return False
        ratelimit.clear(conn, "login", user.email)
        write_entry(conn, actor, "account.lift_lockout", f"account {user_id}", svc.clock())
    return True


def void_undo_links(conn: Connection, svc: Services, actor: Actor, user_id: int) -> int:
    """Stop every live undo link of the account working; how many changes it ended."""
    with conn.transaction():
        # The account's row lock, which an undo holds while it checks its change
        # record: an undo under way finishes first, or finds its link voided.
        users.lock_user(conn, user_id)
        ended = conn.execute(Q["void_undo_links"],
                             {"user_id": user_id, "now": svc.clock()}).rowcount
        write_entry(conn, actor, "account.void_undo_links", f"account {user_id}", svc.clock(),
                    f"{ended} link(s)")
    return ended


def delete_account(conn: Connection, svc: Services, actor: Actor, user_id: int) -> bool:
    """Delete the account as `authsvc users delete` does; False if it is already gone."""
    now = svc.clock()
    with conn.transaction():
        user = users.lock_user(conn, user_id)
        if user is None:
            return False
        deletion.delete_account(conn, svc.settings.secret_keys, user, deleted_by="operator",
                                now=now)
        write_entry(conn, actor, "account.delete", f"account {user_id}", now)
    return True


def lift_suppression(conn: Connection, svc: Services, actor: Actor, address: str) -> bool:
    """Let the address get mail again; False if it was not suppressed."""
    with conn.transaction():
        if not suppressions.remove_suppression(conn, address):
            return False
        # Masked: the log outlives a deleted account, its addresses must not.
        write_entry(conn, actor, "suppression.lift", masked(address), svc.clock())
    return True


def revoke_app(conn: Connection, svc: Services, actor: Actor, app_id: UUID) -> bool:
    """Revoke an app: its key stops working; False if it was revoked already or is unknown."""
    with conn.transaction():
        if not keys.revoke_app(conn, app_id):
            return False
        write_entry(conn, actor, "app.revoke", f"app {app_id}", svc.clock())
    return True
