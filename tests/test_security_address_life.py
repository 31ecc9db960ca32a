"""SPEC §12: an address over its life, played by the attacker first.

Each test is one attack on changing an address, undoing a change or deleting
an account, through the JSON API against real PostgreSQL. The owner holds
their mailbox (every link and code queued for it is theirs); the thief knows
the owner's password and holds mailboxes of their own. Whatever happens,
only a proven mailbox holder ever ends up owning an address, and the oldest
proven address wins a fight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest
from werkzeug.test import TestResponse

from authsvc.accounts import actions, deletion, email_change, links
from authsvc.accounts.tokens import TokenError
from authsvc.services import Services
from testkit.smtp_double import SmtpDouble
from tests.address_life_support import (
    account_email,
    change_code,
    change_link,
    changed,
    claims_of,
    confirmed,
    delete_code,
    delete_link,
    logs_in,
    queued_to,
    request_change,
    session_alive,
    undo_link,
    user_id_of,
    web_session,
)
from tests.api_support import ApiCaller, assert_problem
from tests.link_support import latest_code, latest_link
from tests.pages_support import text_of
from tests.race_support import race, wait_until_waiting_on_a_lock
from tests.worker_support import worker

OWNER = "owner@example.com"
OWNER_PASSWORD = "owner passphrase 11"
THIEF_1 = "thief.one@example.com"
THIEF_2 = "thief.two@example.com"
THIEF_PASSWORD = "thief passphrase 22"
RESTORED_PASSWORD = "owner is back 33"


def _undo(api: ApiCaller, token: str, password: str | None = None) -> TestResponse:
    body = {"token": token} if password is None else {"token": token, "password": password}
    return api.post("/email-changes/undo", body)


def _thief_takes_over(api: ApiCaller, conn: psycopg.Connection, svc: Services) -> tuple[str, str]:
    """The thief changes the owner's address to theirs, resets the password from there and
    changes the address again; returns the owner's undo link and the thief's."""
    owners_undo = changed(api, conn, svc, OWNER, OWNER_PASSWORD, THIEF_1)
    assert api.post("/password-resets", {"email": THIEF_1}).status_code == 202
    reset = latest_link(conn, svc, THIEF_1, "reset")
    body = {"token": reset, "password": THIEF_PASSWORD}
    assert api.post("/password-resets/confirm", body).status_code == 200
    thiefs_undo = changed(api, conn, svc, THIEF_1, THIEF_PASSWORD, THIEF_2)
    return owners_undo, thiefs_undo


# --- a thief with the password: the owner's undo wins ---------------------------------


def test_the_owners_undo_restores_the_account_after_a_thief_changed_reset_and_changed_again(
    api, conn, svc
):
    confirmed(api, conn, svc, OWNER, OWNER_PASSWORD)
    owner_id = user_id_of(conn, OWNER)
    owners_undo, thiefs_undo = _thief_takes_over(api, conn, svc)
    thiefs_session = web_session(conn, svc, THIEF_2, THIEF_PASSWORD)

    answer = _undo(api, owners_undo, RESTORED_PASSWORD)

    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert answer.get_json() == {"email": OWNER}
    assert account_email(conn, owner_id) == OWNER
    assert not session_alive(conn, svc, thiefs_session)  # every session ended
    assert not logs_in(api, THIEF_2, THIEF_PASSWORD)
    assert not logs_in(api, OWNER, THIEF_PASSWORD)  # the thief's password is gone
    assert logs_in(api, OWNER, RESTORED_PASSWORD)
    # The thief's later undo link (back to their first mailbox) died with the owner's undo.
    assert_problem(_undo(api, thiefs_undo), 410, "token_used")
    assert account_email(conn, owner_id) == OWNER


@pytest.mark.parametrize("order", ["thiefs_first", "owners_first"])
def test_two_undo_links_used_in_either_order_the_oldest_address_wins(api, conn, svc, order):
    confirmed(api, conn, svc, OWNER, OWNER_PASSWORD)
    owner_id = user_id_of(conn, OWNER)
    owners_undo, thiefs_undo = _thief_takes_over(api, conn, svc)

    if order == "thiefs_first":
        # The thief moves the account back to their first mailbox: the owner's
        # link (to an older address) still works afterwards.
        assert _undo(api, thiefs_undo, THIEF_PASSWORD).status_code == 200
        assert account_email(conn, owner_id) == THIEF_1
        assert _undo(api, owners_undo, RESTORED_PASSWORD).status_code == 200
    else:
        assert _undo(api, owners_undo, RESTORED_PASSWORD).status_code == 200
        assert_problem(_undo(api, thiefs_undo, THIEF_PASSWORD), 410, "token_used")
    assert account_email(conn, owner_id) == OWNER
    assert logs_in(api, OWNER, RESTORED_PASSWORD)
    assert not logs_in(api, OWNER, THIEF_PASSWORD)


def test_an_undo_without_a_password_clears_it_and_mails_a_reset_outside_the_budget(
    api, conn, svc
):
    confirmed(api, conn, svc, OWNER, OWNER_PASSWORD)
    owners_undo, _ = _thief_takes_over(api, conn, svc)
    for _ in range(svc.settings.rate_limit_email.limit + 1):  # the thief spends the budget
        api.post("/password-resets", {"email": OWNER})
    before = len(queued_to(conn, OWNER))

    assert _undo(api, owners_undo).status_code == 200

    assert not logs_in(api, OWNER, OWNER_PASSWORD)
    assert not logs_in(api, OWNER, THIEF_PASSWORD)
    # Exactly one new email to the restored address: a reset link, despite the budget.
    assert queued_to(conn, OWNER)[before:] == [("reset", "reset")]
    body = {"token": latest_link(conn, svc, OWNER, "reset"), "password": RESTORED_PASSWORD}
    assert api.post("/password-resets/confirm", body).status_code == 200
    assert logs_in(api, OWNER, RESTORED_PASSWORD)
    # And the address it was moved back from hears about it.
    assert queued_to(conn, THIEF_2)[-1] == ("email_restored", None)


# --- a change to an address someone else holds ------------------------------------------


def test_a_change_to_a_confirmed_accounts_address_answers_the_same_and_tells_only_that_mailbox(
    api, conn, svc
):
    confirmed(api, conn, svc, OWNER, OWNER_PASSWORD)
    confirmed(api, conn, svc, "bob@example.com")
    ann = confirmed(api, conn, svc, "ann@example.com", "ann passphrase 44")
    ann_id = user_id_of(conn, ann)
    free = api.post("/email-changes", {"email": ann, "password": "ann passphrase 44",
                                       "new_email": "fresh@example.com"})
    owners_before = queued_to(conn, OWNER)

    taken = api.post("/email-changes", {"email": "bob@example.com", "password":
                                        "correct horse battery", "new_email": OWNER})

    assert (taken.status_code, taken.headers.get("Content-Type"), taken.get_data()) == (
        free.status_code, free.headers.get("Content-Type"), free.get_data())
    # The holder's mailbox gets the "already used; nothing changed" notice, and no link.
    assert queued_to(conn, OWNER)[len(owners_before):] == [("email_in_use", None)]
    assert account_email(conn, user_id_of(conn, "bob@example.com")) == "bob@example.com"
    assert account_email(conn, ann_id) == ann
    assert not any(p == "email_change" for _, p in queued_to(conn, OWNER))


def test_a_change_to_an_unconfirmed_accounts_address_retires_that_account_for_good(
    api, conn, svc
):
    squatter = "squatted@example.com"
    api.sign_up(squatter, "squatter passphrase 5")  # never confirmed
    squatters_verify = latest_link(conn, svc, squatter, "verify")
    squatters_code = latest_code(conn, svc, squatter, "verify")
    ann = confirmed(api, conn, svc, "ann@example.com", "ann passphrase 44")

    changed(api, conn, svc, ann, "ann passphrase 44", squatter)

    assert logs_in(api, squatter, "ann passphrase 44")
    assert not logs_in(api, squatter, "squatter passphrase 5")
    # The retired account's links and codes answer like invalid ones.
    assert_problem(api.post("/verifications/confirm", {"token": squatters_verify}), 400,
                   "invalid_token")
    assert_problem(api.post("/verifications/confirm",
                            {"email": squatter, "code": squatters_code}), 400, "invalid_code")
    assert conn.execute("SELECT count(*) FROM users WHERE email = %s",
                        (squatter,)).fetchone() == (1,)


# --- races ---------------------------------------------------------------------------


def test_two_concurrent_confirms_of_one_change_link_one_wins(api, conn, svc, database_url):
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, "correct horse battery", "new@example.com")
    token = change_link(conn, svc, "new@example.com")

    def confirm(own: psycopg.Connection, _i: int) -> str:
        try:
            email_change.confirm_email_change(own, svc, token=token)
        except TokenError as exc:
            return exc.code
        return "ok"

    outcomes = race(database_url, 4, confirm)
    assert sorted(outcomes) == ["ok", "token_used", "token_used", "token_used"]
    assert len(claims_of(conn, ann, "email_revert")) == 1  # one undo email, to the old address


def _interleave(direct_database_url: str, observer: psycopg.Connection,
                first: Callable[[psycopg.Connection], object],
                second: Callable[[psycopg.Connection], object]) -> list[object]:
    """Run `first` in a transaction left open until `second`, on another connection, waits
    on its locks; then commit `first` and let `second` finish. The outcomes, in order
    (a TokenError or EmailTaken raised is an outcome)."""
    outcomes: list[object] = [None, None]

    def run(index: int, use_case: Callable[[psycopg.Connection], object],
            own: psycopg.Connection) -> None:
        try:
            outcomes[index] = use_case(own)
        except (TokenError, email_change.EmailTaken) as exc:
            outcomes[index] = exc

    with psycopg.connect(direct_database_url, autocommit=True) as one, \
            psycopg.connect(direct_database_url, autocommit=True) as two:
        with one.transaction():
            run(0, first, one)
            racing = threading.Thread(target=run, args=(1, second, two))
            racing.start()
            wait_until_waiting_on_a_lock(observer, two.info.backend_pid,
                                         "the second use case to wait for the first")
        racing.join(10)
        assert not racing.is_alive()
    return outcomes


def _code(outcome: object) -> str:
    return outcome.code if isinstance(outcome, TokenError) else "ok"


@pytest.mark.parametrize("first", ["confirm", "undo"])
def test_a_confirm_racing_an_undo_ends_with_the_oldest_proven_address(
    api, conn, svc, direct_database_url, first
):
    """The thief changed the owner's address and asks another change; the owner's undo
    and the thief's confirmation of the second change meet."""
    confirmed(api, conn, svc, OWNER, OWNER_PASSWORD)
    owner_id = user_id_of(conn, OWNER)
    owners_undo = changed(api, conn, svc, OWNER, OWNER_PASSWORD, THIEF_1)
    request_change(api, THIEF_1, OWNER_PASSWORD, THIEF_2)
    thiefs_confirm = change_link(conn, svc, THIEF_2)

    def confirm(own: psycopg.Connection) -> object:
        return email_change.confirm_email_change(own, svc, token=thiefs_confirm)

    def undo(own: psycopg.Connection) -> object:
        return email_change.undo_email_change(own, svc, token=owners_undo,
                                              password=RESTORED_PASSWORD)

    steps = (confirm, undo) if first == "confirm" else (undo, confirm)
    outcomes = [_code(o) for o in _interleave(direct_database_url, conn, *steps)]

    # Whichever committed first, the undo restores the owner's address; a confirm that
    # came second finds its link dead (the undo ended every outstanding link).
    assert outcomes == (["ok", "ok"] if first == "confirm" else ["ok", "token_superseded"])
    assert account_email(conn, owner_id) == OWNER
    assert logs_in(api, OWNER, RESTORED_PASSWORD)
    assert not logs_in(api, OWNER, OWNER_PASSWORD)
    if first == "confirm":  # the thief's undo link of that change died with the owner's undo
        assert_problem(_undo(api, undo_link(conn, svc, THIEF_1)), 410, "token_used")


@pytest.mark.parametrize("first", ["reset", "confirm"])
def test_a_password_reset_racing_a_confirm_leaves_each_address_with_its_proven_holder(
    api, conn, svc, direct_database_url, first
):
    """The owner resets her password while a change someone asked with it is confirmed."""
    ann = confirmed(api, conn, svc, "ann@example.com", OWNER_PASSWORD)
    ann_id = user_id_of(conn, ann)
    assert api.post("/password-resets", {"email": ann}).status_code == 202
    reset = latest_link(conn, svc, ann, "reset")
    request_change(api, ann, OWNER_PASSWORD, "elsewhere@example.com")
    confirm_link = change_link(conn, svc, "elsewhere@example.com")

    def reset_password(own: psycopg.Connection) -> object:
        return actions.reset_password(own, svc, token=reset, password=RESTORED_PASSWORD)

    def confirm(own: psycopg.Connection) -> object:
        return email_change.confirm_email_change(own, svc, token=confirm_link)

    steps = (reset_password, confirm) if first == "reset" else (confirm, reset_password)
    outcomes = [_code(o) for o in _interleave(direct_database_url, conn, *steps)]

    # A password change cancels a pending change; a confirmed change ends every
    # outstanding link. Either way exactly one of the two took effect.
    assert outcomes == ["ok", "token_superseded"]
    if first == "reset":
        assert account_email(conn, ann_id) == ann
        assert logs_in(api, ann, RESTORED_PASSWORD)
    else:
        assert account_email(conn, ann_id) == "elsewhere@example.com"
        assert logs_in(api, "elsewhere@example.com", OWNER_PASSWORD)
        # The owner still has her undo link at the old address.
        assert _undo(api, undo_link(conn, svc, ann), RESTORED_PASSWORD).status_code == 200
        assert account_email(conn, ann_id) == ann


# --- links issued before a change ------------------------------------------------------


def test_reset_links_and_codes_issued_before_a_change_never_redeem_after_it(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    assert api.post("/password-resets", {"email": ann}).status_code == 202
    reset, reset_code = latest_link(conn, svc, ann, "reset"), latest_code(conn, svc, ann, "reset")
    assert api.post("/account-deletions",
                    {"email": ann, "password": "correct horse battery"}).status_code == 202
    deletion = delete_link(conn, svc, ann)

    changed(api, conn, svc, ann, "correct horse battery", "new@example.com")

    assert_problem(api.post("/password-resets/confirm",
                            {"token": reset, "password": RESTORED_PASSWORD}),
                   410, "token_superseded")
    assert_problem(api.post("/password-resets/confirm",
                            {"email": ann, "code": reset_code, "password": RESTORED_PASSWORD}),
                   400, "invalid_code")
    assert_problem(api.post("/account-deletions/confirm", {"token": deletion}),
                   410, "token_superseded")
    assert logs_in(api, "new@example.com", "correct horse battery")


# --- deletion while an undo link lives ----------------------------------------------------


def test_a_thief_cannot_delete_the_account_while_the_owners_undo_link_lives(api, conn, svc):
    confirmed(api, conn, svc, OWNER, OWNER_PASSWORD)
    owner_id = user_id_of(conn, OWNER)
    owners_undo = changed(api, conn, svc, OWNER, OWNER_PASSWORD, THIEF_1)
    thiefs_before = queued_to(conn, THIEF_1)

    assert api.post("/account-deletions",
                    {"email": THIEF_1, "password": OWNER_PASSWORD}).status_code == 202

    # The confirmation goes to the owner's old address, not to the thief's.
    assert queued_to(conn, THIEF_1) == thiefs_before
    assert queued_to(conn, OWNER)[-1] == ("account_delete", "account_delete")
    deletion, code = delete_link(conn, svc, OWNER), delete_code(conn, svc, OWNER)
    # The owner's undo cancels the pending deletion.
    assert _undo(api, owners_undo, RESTORED_PASSWORD).status_code == 200
    assert_problem(api.post("/account-deletions/confirm", {"token": deletion}),
                   410, "token_superseded")
    assert_problem(api.post("/account-deletions/confirm", {"email": OWNER, "code": code}),
                   400, "invalid_code")
    assert account_email(conn, owner_id) == OWNER


def test_once_the_undo_link_expired_deletion_is_confirmed_at_the_current_address(
    api, conn, svc, clock
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    changed(api, conn, svc, ann, "correct horse battery", "new@example.com")
    clock.advance(svc.settings.email_revert_ttl)

    assert api.post("/account-deletions", {"email": "new@example.com",
                                           "password": "correct horse battery"}).status_code == 202
    assert queued_to(conn, "new@example.com")[-1] == ("account_delete", "account_delete")


# --- which links are newest-only, once --------------------------------------------------


def test_the_undo_link_has_no_code_and_later_links_do_not_retire_it(
    api, conn, svc, database_url, settings, smtp: SmtpDouble
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    owners_undo = changed(api, conn, svc, ann, "correct horse battery", "new@example.com")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    [undo_email] = [m for m in smtp.messages if m.rcpt_tos == [ann]][-1:]
    assert "token=" in undo_email.text
    assert not any(w.isdigit() and len(w) == 6 for w in undo_email.text.split())

    # What a thief would do next: another change, a reset, a deletion request.
    request_change(api, "new@example.com", "correct horse battery", "newer@example.com")
    assert api.post("/password-resets", {"email": "new@example.com"}).status_code == 202
    body = {"token": latest_link(conn, svc, "new@example.com", "reset"),
            "password": THIEF_PASSWORD}
    assert api.post("/password-resets/confirm", body).status_code == 200
    assert api.post("/account-deletions", {"email": "new@example.com",
                                           "password": THIEF_PASSWORD}).status_code == 202

    assert links.check_link(conn, svc, owners_undo, "email_revert").email == "new@example.com"
    assert _undo(api, owners_undo, RESTORED_PASSWORD).status_code == 200
    assert_problem(_undo(api, owners_undo, RESTORED_PASSWORD), 410, "token_used")


def test_change_links_and_codes_are_newest_only_and_once(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    request_change(api, ann, "correct horse battery", "first@example.com")
    first_link, first_code = (change_link(conn, svc, "first@example.com"),
                              change_code(conn, svc, "first@example.com"))
    request_change(api, ann, "correct horse battery", "second@example.com")

    assert_problem(api.post("/email-changes/confirm", {"token": first_link}), 410,
                   "token_superseded")
    assert_problem(api.post("/email-changes/confirm",
                            {"email": "first@example.com", "code": first_code}),
                   400, "invalid_code")
    code = change_code(conn, svc, "second@example.com")
    answer = api.post("/email-changes/confirm", {"email": "second@example.com", "code": code})
    assert answer.status_code == 200
    assert answer.get_json() == {"email": "second@example.com", "previous_email": ann}
    assert_problem(api.post("/email-changes/confirm",
                            {"email": "second@example.com", "code": code}), 400, "invalid_code")
    assert_problem(api.post("/email-changes/confirm",
                            {"token": change_link(conn, svc, "second@example.com")}),
                   410, "token_used")


def test_deletion_links_and_codes_are_newest_only_and_once(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    body = {"email": ann, "password": "correct horse battery"}
    assert api.post("/account-deletions", body).status_code == 202
    first_link, first_code = delete_link(conn, svc, ann), delete_code(conn, svc, ann)
    assert api.post("/account-deletions", body).status_code == 202

    assert_problem(api.post("/account-deletions/confirm", {"token": first_link}), 410,
                   "token_superseded")
    assert_problem(api.post("/account-deletions/confirm", {"email": ann, "code": first_code}),
                   400, "invalid_code")
    token = delete_link(conn, svc, ann)
    assert api.post("/account-deletions/confirm", {"token": token}).get_json() == {"deleted": True}
    # Gone: the link now answers like any link this service never issued.
    assert_problem(api.post("/account-deletions/confirm", {"token": token}), 400,
                   "invalid_token")


# --- deletion -------------------------------------------------------------------------


def test_a_scanner_opening_the_deletion_link_deletes_nothing(api, conn, svc, client):
    ann = confirmed(api, conn, svc, "ann@example.com")
    assert api.post("/account-deletions",
                    {"email": ann, "password": "correct horse battery"}).status_code == 202
    token = delete_link(conn, svc, ann)

    for _ in range(3):
        page = client.get(f"/account/delete?token={token}")
        assert page.status_code == 200
        assert client.head(f"/account/delete?token={token}").status_code == 200
    assert 'value="Delete my account"' in page.get_data(as_text=True)  # a button to click
    assert "cannot be undone" in text_of(page)
    assert user_id_of(conn, ann)
    assert logs_in(api, ann, "correct horse battery")


def test_a_deleted_accounts_old_links_and_codes_answer_like_invalid_ones(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    assert api.post("/password-resets", {"email": ann}).status_code == 202
    reset, reset_code = latest_link(conn, svc, ann, "reset"), latest_code(conn, svc, ann, "reset")
    body = {"email": ann, "password": "correct horse battery"}
    assert api.post("/account-deletions", body).status_code == 202
    code = delete_code(conn, svc, ann)

    assert api.post("/account-deletions/confirm", {"email": ann, "code": code}).status_code == 200

    garbage = api.post("/password-resets/confirm",
                       {"token": reset[:-4] + "AAAA", "password": RESTORED_PASSWORD})
    old = api.post("/password-resets/confirm", {"token": reset, "password": RESTORED_PASSWORD})
    assert (old.status_code, old.get_data()) == (garbage.status_code, garbage.get_data())
    assert_problem(old, 400, "invalid_token")
    wrong = api.post("/password-resets/confirm",
                     {"email": ann, "code": "000000", "password": RESTORED_PASSWORD})
    used = api.post("/password-resets/confirm",
                    {"email": ann, "code": reset_code, "password": RESTORED_PASSWORD})
    assert (used.status_code, used.get_data()) == (wrong.status_code, wrong.get_data())
    assert not logs_in(api, ann, "correct horse battery")


def _tables_holding(conn: psycopg.Connection, text: str) -> list[str]:
    """Every table (but the test inbox's, which is the mailbox itself) with a row that
    holds `text`, in any column, as text or as bytes."""
    found = []
    tables = [r[0] for r in conn.execute(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        " AND table_name NOT LIKE 'inbox%' ORDER BY table_name")]
    hexed = text.encode().hex()
    for table in tables:
        row = conn.execute(
            f"SELECT count(*) FROM {table} AS t"  # names from the catalog
            " WHERE strpos(lower(t::text), lower(%s)) > 0 OR strpos(t::text, %s) > 0",
            (text, hexed)).fetchone()
        if row and row[0]:
            found.append(table)
    return found


def test_a_deleted_account_leaves_no_address_anywhere_only_a_keyed_digest(
    api, conn, svc, database_url, settings, smtp: SmtpDouble
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    ann_id = user_id_of(conn, ann)
    # A history: a reset, wrong codes, a change and an idempotent call whose answer
    # names the addresses, sessions, emails sent with their trails.
    assert api.post("/password-resets", {"email": ann}).status_code == 202
    api.post("/password-resets/confirm",
             {"email": ann, "code": "000000", "password": RESTORED_PASSWORD})
    request_change(api, ann, "correct horse battery", "new@example.com")
    api.post("/email-changes/confirm", {"token": change_link(conn, svc, "new@example.com")},
             idempotency_key="confirm-1")
    web_session(conn, svc, "new@example.com", "correct horse battery")
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    assert _tables_holding(conn, "new@example.com")  # the grep finds what is there

    body = {"email": "new@example.com", "password": "correct horse battery"}
    assert api.post("/account-deletions", body).status_code == 202
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()
    # An undo link lives, so the confirmation went to the oldest address holding one.
    token = delete_link(conn, svc, ann)
    sent_before = len(smtp.messages)
    assert api.post("/account-deletions/confirm", {"token": token}).get_json() == {"deleted": True}
    worker(database_url, settings, smtp.url, svc.clock, once=True).run()

    assert len(smtp.messages) == sent_before  # no email
    assert account_email(conn, ann_id) is None
    assert _tables_holding(conn, "new@example.com") == []
    assert _tables_holding(conn, ann) == []
    digest = deletion.address_digest(settings.secret_keys, "new@example.com")
    assert _tables_holding(conn, digest)  # a keyed digest stands in for the address


def test_the_address_can_sign_up_again_after_deletion(api, conn, svc):
    ann = confirmed(api, conn, svc, "ann@example.com")
    old_id = user_id_of(conn, ann)
    assert api.post("/account-deletions",
                    {"email": ann, "password": "correct horse battery"}).status_code == 202
    assert api.post("/account-deletions/confirm",
                    {"token": delete_link(conn, svc, ann)}).status_code == 200

    confirmed(api, conn, svc, ann, "a fresh start 55")

    assert user_id_of(conn, ann) != old_id
    assert logs_in(api, ann, "a fresh start 55")
    assert not logs_in(api, ann, "correct horse battery")


# --- guessing codes -------------------------------------------------------------------


def _wrong_codes(api: ApiCaller, email: str, tries: list[tuple[str, dict[str, str]]],
                 right: set[str]) -> None:
    """One wrong code per (path, extra body) in `tries`, typed with `email`."""
    wrong = next(c for c in ("000000", "111111", "222222", "333333") if c not in right)
    for path, extra in tries:
        answer = api.post(path, {"email": email, "code": wrong, **extra})
        assert_problem(answer, 400, "invalid_code")


def test_wrong_codes_across_every_purpose_stop_at_twenty_an_hour(api, conn, svc):
    """An address with a verify, a reset and a change code outstanding, and another with
    a reset and a deletion code: twenty wrong codes an hour in all, whatever the
    purposes, though no code's own five tries were used up."""
    target = "target@example.com"
    none: dict[str, str] = {}
    verify = ("/verifications/confirm", none)
    reset = ("/password-resets/confirm", {"password": RESTORED_PASSWORD})
    change = ("/email-changes/confirm", none)
    api.sign_up(target, "squatter passphrase 5")  # a verify code
    bob = confirmed(api, conn, svc, "bob@example.com")
    for _round in range(2):  # each round brings new codes with five fresh tries
        assert api.post("/verifications", {"email": target}).status_code == 202
        assert api.post("/password-resets", {"email": target}).status_code == 202
        request_change(api, bob, "correct horse battery", target)  # a change code, same address
        codes = {latest_code(conn, svc, target, p) for p in ("verify", "reset", "email_change")}
        _wrong_codes(api, target, [verify, reset, change] * 3 + [reset], codes)
    # Twenty wrong codes this hour: even the newest, right code of any purpose is refused.
    right = change_code(conn, svc, target)
    assert_problem(api.post("/email-changes/confirm", {"email": target, "code": right}),
                   410, "code_exhausted")

    ann = confirmed(api, conn, svc, "ann@example.com")
    deletion = ("/account-deletions/confirm", none)
    for round_ in range(3):
        assert api.post("/password-resets", {"email": ann}).status_code == 202
        assert api.post("/account-deletions",
                        {"email": ann, "password": "correct horse battery"}).status_code == 202
        codes = {latest_code(conn, svc, ann, p) for p in ("reset", "account_delete")}
        _wrong_codes(api, ann, [reset, deletion] * (4 if round_ < 2 else 2), codes)
    right = delete_code(conn, svc, ann)
    assert_problem(api.post("/account-deletions/confirm", {"email": ann, "code": right}),
                   410, "code_exhausted")
    assert user_id_of(conn, ann)
