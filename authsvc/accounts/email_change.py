"""Changing an account's address, and undoing a change (SPEC §12): one transaction each.

The same engine as verify and reset (links.py): versioned links, newest only,
once, a code beside the change link, per-purpose email budgets. Two purposes:

- `email_change`: the link and code sent to the new address. Confirming it
  proves the new address; the account moves there, every outstanding link
  and code of the account dies, and the old address gets a notice with an
  undo link.
- `email_change_approval`: with AUTHSVC_EMAIL_CHANGE_CONFIRM_OLD on, the
  link and code sent to the account's own address at the same time, under
  the same version. The change takes effect when both are redeemed, in
  either order; the first one redeemed is recorded and waits (Pending).
- `email_revert`: that undo link. No code (a week-long code that restores an
  account is worth guessing) and not "newest only": each confirmed change is
  a row (change_records.py) and its link works while the row stands. Using
  one restores its address, voids the undo links of every later change (so
  the oldest proven address wins, whatever the order) and ends every session.

Throughout, only a proven mailbox holder ends up owning an address: an
unconfirmed account holding the address being taken is deleted for good, a
confirmed one makes the change fail (EmailTaken).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from psycopg import Connection
from psycopg.errors import UniqueViolation
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from authsvc import ratelimit
from authsvc.accounts import actions, change_records, code_tries, deletion, links, sessions, users
from authsvc.accounts.sessions import SessionUser
from authsvc.accounts.tokens import TokenClaims, TokenError
from authsvc.accounts.users import User
from authsvc.app_events.producer import queue_account_event, user_data
from authsvc.apps.keys import App
from authsvc.db.queries import load_queries
from authsvc.outbox import NO_OUTCOME_EVENTS, NOTIFY_CHANNEL, enqueue_email
from authsvc.services import Services

Q = load_queries(Path(__file__).with_suffix(".sql"))
T = TypeVar("T")


class EmailTaken(Exception):
    """A confirmed account holds the address this change or undo would take."""


class SameAddress(ValueError):
    """The new address is the account's own."""


@dataclass(frozen=True)
class ChangedAddress:
    """A confirmed change: the account as it now is, and the address it left."""

    user: User
    previous_email: str


@dataclass(frozen=True)
class Pending:
    """One side of a change that needs both addresses, redeemed; the other is awaited."""

    awaiting: str  # "old_address" or "new_address"


# Each side of a change (links.TWO_SIDED): the other side's purpose, and the address a
# redeemed side leaves awaited.
OTHER_SIDE = dict(zip(links.TWO_SIDED, reversed(links.TWO_SIDED), strict=True))
AWAITING = {"email_change": "old_address", "email_change_approval": "new_address"}


def request_email_change(
    conn: Connection,
    svc: Services,
    *,
    email: str,
    new_email: str,
    password: str | None = None,
    sign_in_code: str | None = None,
    session: SessionUser | None = None,
    redirect_url: str | None = None,
    app: App | None = None,
    locale: str | None = None,
) -> None:
    """Send a change link and code to `new_email`, for the account `email` and one proof
    open: its password, or for an account with none a sign-in code or a recent sign-in
    session (actions.confirm_identity).

    InvalidCredentials (a wrong password, an unknown or unconfirmed account,
    counted against the login limit) or TooManyAttempts, as at sign-in.
    Otherwise the same outcome whether or not `new_email` is taken: a
    confirmed holder's mailbox gets a notice instead, and nothing changes.
    """
    if new_email == email:
        raise SameAddress("the new address is the account's own")
    user = actions.confirm_identity(conn, svc, email=email, password=password,
                                    sign_in_code=sign_in_code, session=session)
    now = svc.clock()
    payload = {**links.email_payload(app, redirect_url, locale=locale), NO_OUTCOME_EVENTS: True}
    approval = links.email_budget(svc, email, "email_change_approval", now).params()
    params = {
        **links.email_budget(svc, new_email, "email_change", now).params(),
        **{f"approval_{name}": value for name, value in approval.items()},
        "approval": svc.settings.email_change_confirm_old,
        "approval_digest": code_tries.address_digest(email),
        "digest": code_tries.address_digest(new_email),
        "user_id": user.id,
        "new_email": new_email,
        "app_id": app.id if app else None,
        "payload": Jsonb(payload),
        "issued_at": links.issued_at(now),
        "channel": NOTIFY_CHANNEL,
    }
    conn.execute(Q["queue_email_change"], params)


def confirm_email_change(
    conn: Connection, svc: Services, *, token: object, app: App | None = None,
    purpose: str = "email_change", locale: str | None = None,
) -> ChangedAddress | Pending:
    """Redeem a change link (`purpose` email_change, from the new address) or an approval
    link (email_change_approval, from the old one). Once each, only the newest.
    `locale`: the request's, for the email to the old address if the change completes."""
    claims = svc.tokens.read(token, purpose)
    links.current_holder(conn, claims)
    return _redeem_change(conn, svc, claims, app, locale)


def confirm_email_change_code(
    conn: Connection, svc: Services, *, email: str, code: object, app: App | None = None,
    purpose: str = "email_change", locale: str | None = None,
) -> ChangedAddress | Pending:
    """Redeem the code of a change email, typed with the address it was sent to (the new
    one; the old one for an approval)."""
    attempt, _user = links.matching_code(conn, svc, email, purpose, code)
    assert attempt.claims is not None
    return _redeem_change(conn, svc, attempt.claims, app, locale)


def _retrying_once_if_taken(step: Callable[[], T]) -> T:
    """Run `step` (one savepoint); again once if the unique address index refused it.

    A signup can insert the address between our look at who holds it and
    our update (its row is invisible until it commits). Looked at again, an
    unconfirmed holder is retired; a confirmed one is EmailTaken.
    """
    try:
        return step()
    except UniqueViolation:
        try:
            return step()
        except UniqueViolation:
            raise EmailTaken() from None


def _take_address(conn: Connection, svc: Services, user: User, address: str,
                  now: datetime) -> None:
    """Make room for `user` at `address`: EmailTaken if a confirmed account holds it; an
    unconfirmed one is deleted for good (nobody proved it, and now someone has)."""
    holder = users.lock_user_by_email(conn, address)
    if holder is None or holder.id == user.id:
        return
    if holder.verified:
        raise EmailTaken()
    deletion.erase_account(conn, svc.settings.secret_keys, holder, deleted_by="retired", now=now)


def _needs_other_side(conn: Connection, svc: Services, claims: TokenClaims) -> bool:
    """Whether the change waits for the other address, under the account's row lock.

    The old address's approval never completes a change alone: only the new
    address's link proves the new mailbox. The new address's link completes
    it alone unless approvals are required and this one is not yet in.
    """
    if claims.purpose == "email_change" and not svc.settings.email_change_confirm_old:
        return False  # the usual change: no query for an approval nobody was asked for
    other = OTHER_SIDE[claims.purpose]
    return not users.was_redeemed(conn, claims.user_id, other, claims.version)


def _redeem_change(
    conn: Connection, svc: Services, claims: TokenClaims, app: App | None, locale: str | None
) -> ChangedAddress | Pending:
    now = svc.clock()

    def redeem() -> ChangedAddress | Pending:
        with conn.transaction():
            # The lock is the single-use guard: a concurrent redemption, undo or
            # reset waits here, then finds the version it needs gone.
            user = users.lock_user(conn, claims.user_id)
            if user is None or user.email_change_version != claims.version:
                raise links.stale_link_error(conn, claims, user)
            if users.was_redeemed(conn, user.id, claims.purpose, claims.version):
                raise TokenError("token_used")  # this side is in; the other is awaited
            if _needs_other_side(conn, svc, claims):
                users.record_redemption(conn, user.id, claims.purpose, claims.version, now)
                return Pending(awaiting=AWAITING[claims.purpose])
            assert user.pending_email is not None  # a current change link has one
            _take_address(conn, svc, user, user.pending_email, now)
            with conn.cursor(row_factory=dict_row) as cur:
                row = cur.execute(Q["confirm_email_change"], {
                    "user_id": user.id, "version": claims.version, "now": now,
                }).fetchone()
            assert row is not None  # under the lock, the version was current
            previous = row.pop("previous_email")
            changed = User(**row)
            users.record_redemption(conn, changed.id, claims.purpose, claims.version, now)
            # The one email of this step: to the old address, with the undo link.
            enqueue_email(
                conn, template="email_changed", recipient=previous, user_id=changed.id,
                purpose="email_revert", token_version=changed.email_revert_version,
                issued_at=links.issued_at(now),
                payload={**links.email_payload(app, locale=locale), "new_email": changed.email,
                         NO_OUTCOME_EVENTS: True},
                app_id=app.id if app else None,
            )
            data = user_data(changed.id, changed.email) | {
                "user_id": str(changed.id), "email": changed.email, "previous_email": previous,
            }
            queue_account_event(conn, user_id=changed.id, event_type="user.email_changed",
                                data=data, now=now)
            return ChangedAddress(changed, previous)

    return _retrying_once_if_taken(redeem)


def undo_email_change(
    conn: Connection,
    svc: Services,
    *,
    token: object,
    password: object = None,
    app: App | None = None,
    locale: str | None = None,
) -> User:
    """Redeem an undo link: the account takes back the address it was sent to.

    Every session ends; every outstanding link and code dies, the undo links
    of later changes too; the password becomes `password` (policy-checked),
    or is cleared and a reset link goes to the restored address (outside its
    email budget: the thief may have spent it). The address moved back from
    gets a notice. EmailTaken when a confirmed account holds the address.
    `locale`: the request's, for the emails this sends.
    """
    claims = svc.tokens.read(token, "email_revert")
    user = links.current_holder(conn, claims)
    change = change_records.find_change(conn, claims.user_id, claims.version)
    assert change is not None  # current_holder found it standing
    password_hash = (
        None if password is None else links.new_password_hash(svc, password, change.old_email)
    )
    now = svc.clock()

    def undo() -> User:
        with conn.transaction():
            locked = users.lock_user(conn, user.id)
            standing = change_records.find_change(conn, claims.user_id, claims.version)
            error = links.undo_link_error(standing if locked else None)
            if error is not None or locked is None or standing is None:
                raise error or TokenError("invalid_token")
            _take_address(conn, svc, locked, standing.old_email, now)
            conn.execute(Q["end_changes_from"],
                         {"user_id": locked.id, "version": claims.version, "now": now})
            restored = users.user_from(conn, Q["restore_address"], {
                "user_id": locked.id, "email": standing.old_email,
                "password_hash": password_hash, "now": now,
            })
            assert restored is not None  # the row is locked
            sessions.end_all_sessions(conn, restored.id)
            ratelimit.clear(conn, "login", restored.email)
            named = links.email_payload(app, locale=locale)
            if password_hash is None:
                # Not counted against the budget: someone who held the account
                # may have spent it, and this link is how the owner gets back in.
                enqueue_email(
                    conn, template="reset", recipient=restored.email, user_id=restored.id,
                    purpose="reset", token_version=restored.reset_version,
                    issued_at=links.issued_at(now), payload={**named, NO_OUTCOME_EVENTS: True},
                    app_id=app.id if app else None,
                )
            if locked.email != restored.email:
                enqueue_email(
                    conn, template="email_restored", recipient=locked.email, user_id=restored.id,
                    payload={**named, "restored_email": restored.email, NO_OUTCOME_EVENTS: True},
                    app_id=app.id if app else None,
                )
            data = user_data(restored.id, restored.email) | {
                "user_id": str(restored.id), "email": restored.email,
                "previous_email": locked.email,
            }
            queue_account_event(conn, user_id=restored.id, event_type="user.email_restored",
                                data=data, now=now)
            return restored

    return _retrying_once_if_taken(undo)
