"""Deleting an account (SPEC §12): confirmed from the mailbox, one transaction.

The request needs the password; the link and code (purpose account_delete)
go to the account's address, or, while an undo link of the account lives,
to the oldest address holding one: a thief who changed the address cannot
delete the account its owner is about to take back, and the owner's undo
cancels the pending deletion (it bumps every version).

Confirming deletes the account, its sessions, codes, pending links and
pending jobs; the outbox rows and trails it leaves keep no address, only a
keyed digest (address_digest: HMAC-SHA256 under a key derived from the
secret keys, which a dictionary cannot reverse without them). No email is
sent; the apps the account belonged to hear `user.deleted`; the address can
sign up afresh.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from psycopg import Connection

from authsvc import ratelimit
from authsvc.accounts import actions, change_records, code_tries, links, users
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.tokens import TokenClaims
from authsvc.accounts.users import User
from authsvc.app_events.producer import queue_account_event
from authsvc.apps import account_apps
from authsvc.apps.keys import App
from authsvc.db.queries import load_queries
from authsvc.outbox import NO_OUTCOME_EVENTS, enqueue_email
from authsvc.services import Services

Q = load_queries(Path(__file__).with_suffix(".sql"))
STAND_IN_PREFIX = "deleted:"


def address_digest(secret_keys: Sequence[str], email: str) -> str:
    """The keyed digest that stands in for a deleted account's address (hex).

    Keyed with the first secret key, through a key of its own (derived, so
    it never signs anything else): whoever holds the keys and an address can
    check whether it was deleted; a database dump alone cannot be read back.
    """
    key = hmac.new(secret_keys[0].encode(), b"authsvc.deleted-address", hashlib.sha256).digest()
    return hmac.new(key, email.encode(), hashlib.sha256).hexdigest()


def deletion_recipient(conn: Connection, svc: Services, user: User, now: datetime) -> str:
    """Where a deletion is confirmed: the oldest address holding a live undo link, else the
    account's own."""
    issued_after = now - timedelta(seconds=svc.settings.email_revert_ttl)
    return change_records.oldest_live_undo_address(conn, user.id, issued_after) or user.email


def request_account_deletion(
    conn: Connection, svc: Services, *, email: str, password: str | None = None,
    sign_in_code: str | None = None, session: SessionUser | None = None, app: App | None = None,
    locale: str | None = None,
) -> None:
    """Send a deletion link and code for the account `email` and one proof open (its
    password, or for an account with none a sign-in code or a recent sign-in session:
    actions.confirm_identity).

    InvalidCredentials or TooManyAttempts as at sign-in; over the recipient's
    budget the earlier links are retired all the same and nothing is sent.
    """
    user = actions.confirm_identity(conn, svc, email=email, password=password,
                                    sign_in_code=sign_in_code, session=session)
    now = svc.clock()
    with conn.transaction():
        recipient = deletion_recipient(conn, svc, user, now)
        budget = links.email_budget(svc, recipient, "account_delete", now)
        allowed = code_tries.count_email(conn, budget, recipient, "account_delete").allowed
        row = conn.execute(Q["start_deletion"], {"user_id": user.id}).fetchone()
        if row is None or not allowed:
            return  # gone meanwhile, or over the budget
        own = app is not None and account_apps.belongs_to_app(conn, user_id=user.id,
                                                               app_id=app.id)
        enqueue_email(
            conn, template="account_delete", recipient=recipient, user_id=user.id,
            purpose="account_delete", token_version=int(row[0]), issued_at=links.issued_at(now),
            payload={**links.email_payload(app, own_account=own, locale=locale),
                     NO_OUTCOME_EVENTS: True},
            app_id=app.id if app else None,
        )


def confirm_account_deletion(conn: Connection, svc: Services, *, token: object) -> None:
    """Redeem a deletion link: the account is gone. Once, only the newest."""
    claims = svc.tokens.read(token, "account_delete")
    links.current_holder(conn, claims)
    _redeem_deletion(conn, svc, claims)


def confirm_account_deletion_code(
    conn: Connection, svc: Services, *, email: str, code: object
) -> None:
    """Redeem the code of a deletion email, typed with the address it was sent to."""
    attempt, _user = links.matching_code(conn, svc, email, "account_delete", code)
    assert attempt.claims is not None
    _redeem_deletion(conn, svc, attempt.claims)


def _redeem_deletion(conn: Connection, svc: Services, claims: TokenClaims) -> None:
    now = svc.clock()
    with conn.transaction():
        user = users.lock_user(conn, claims.user_id)
        if user is None or user.account_delete_version != claims.version:
            # A second redemption finds the account gone: like any link never issued.
            raise links.stale_link_error(conn, claims, user)
        delete_account(conn, svc.settings.secret_keys, user, deleted_by="owner", now=now)


def delete_account_by_address(
    conn: Connection, secret_keys: Sequence[str], *, email: str, now: datetime
) -> User | None:
    """An operator's deletion (`authsvc users delete`): the account deleted, None if none."""
    with conn.transaction():
        user = users.lock_user_by_email(conn, email)
        if user is not None:
            delete_account(conn, secret_keys, user, deleted_by="operator", now=now)
    return user


def delete_account(
    conn: Connection, secret_keys: Sequence[str], user: User, *, deleted_by: str, now: datetime
) -> None:
    """Delete `user` and tell its apps (`user.deleted`), in the caller's transaction."""
    # Queued before the account_apps rows go with the account. The event names
    # the account by id only: no address may stay behind in the outbox.
    data = {"user": {"id": str(user.id)}, "user_id": str(user.id)}
    queue_account_event(conn, user_id=user.id, event_type="user.deleted", data=data, now=now,
                        account_deleted=True)
    erase_account(conn, secret_keys, user, deleted_by=deleted_by, now=now)


def erase_account(
    conn: Connection, secret_keys: Sequence[str], user: User, *, deleted_by: str, now: datetime
) -> None:
    """Remove `user` leaving no address behind, in the caller's transaction (`user` locked).

    Also how an unconfirmed account is retired when someone proves its
    address (`deleted_by="retired"`): its links and codes die with it.
    """
    addresses = sorted({user.email, *change_records.account_addresses(conn, user.id)})
    stand_ins = [STAND_IN_PREFIX + address_digest(secret_keys, a) for a in addresses]
    redact = {"user_id": user.id, "addresses": addresses, "stand_ins": stand_ins}
    conn.execute(Q["drop_pending_jobs"], {"user_id": user.id})
    conn.execute(Q["redact_trails"], redact)
    conn.execute(Q["redact_jobs"], redact)
    conn.execute(Q["redact_operator_log"], redact)
    conn.execute(Q["redact_idempotency_records"], redact)
    conn.execute(Q["forget_code_tries"],
                 {"code_digests": [code_tries.address_digest(a) for a in addresses]})
    for address in addresses:
        ratelimit.clear(conn, "login", address)
    conn.execute(Q["forget_redemptions"], {"user_id": user.id})
    conn.execute(Q["delete_user"], {"user_id": user.id})
    conn.execute(Q["record_deletion"], {
        "user_id": user.id, "digest": address_digest(secret_keys, user.email), "now": now,
        "deleted_by": deleted_by,
    })
