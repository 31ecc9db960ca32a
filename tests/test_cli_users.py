"""`authsvc users show|delete ADDRESS` (SPEC §12): an account's state, an operator's deletion."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from authsvc.accounts import deletion
from authsvc.cli import main
from tests.address_life_support import (
    changed,
    confirmed,
    logs_in,
    request_change,
    web_session,
)
from tests.api_support import SIGNUP_PASSWORD


def _run(args: list[str], env: dict[str, str]) -> Result:
    return CliRunner().invoke(main, args, env=env)


def test_show_prints_the_state_the_pending_change_the_changes_and_the_sessions(
    api, conn, svc, env
):
    ann = confirmed(api, conn, svc, "ann@example.com")
    changed(api, conn, svc, ann, SIGNUP_PASSWORD, "second@example.com")
    request_change(api, "second@example.com", SIGNUP_PASSWORD, "third@example.com")
    web_session(conn, svc, "second@example.com", SIGNUP_PASSWORD)

    result = _run(["users", "show", " Second@Example.com "], env)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "address:        second@example.com" in lines
    assert any(line.startswith("state:          confirmed (since ") for line in lines)
    assert "password:       set" in lines
    assert "pending change: third@example.com" in lines
    assert "address changes: 1" in lines
    assert any("ann@example.com -> second@example.com  (undo link live until" in line
               for line in lines)
    assert "sessions:       1" in lines
    assert any("test browser" in line for line in lines)
    assert "token" not in result.output  # no usable link or code, ever


def test_show_an_unconfirmed_account_and_one_with_no_password(api, conn, svc, env):
    api.sign_up("new@example.com")
    api.sign_up("new@example.com")
    assert "state:          unconfirmed, contested" in _run(
        ["users", "show", "new@example.com"], env).output.splitlines()
    ann = confirmed(api, conn, svc, "ann@example.com")
    undo = changed(api, conn, svc, ann, SIGNUP_PASSWORD, "second@example.com")
    assert api.post("/email-changes/undo", {"token": undo}).status_code == 200
    output = _run(["users", "show", ann], env).output
    assert "password:       none (a reset link sets one)" in output.splitlines()
    assert "(undone " in output


def test_delete_removes_the_account_as_the_owners_deletion_would(api, conn, svc, env, settings):
    ann = confirmed(api, conn, svc, "ann@example.com")
    user_id = conn.execute("SELECT id FROM users WHERE email = %s", (ann,)).fetchone()[0]

    result = _run(["users", "delete", "ANN@example.com"], env)

    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"deleted account {user_id} (ann@example.com)")
    assert not logs_in(api, ann, SIGNUP_PASSWORD)
    assert conn.execute("SELECT address_digest, deleted_by FROM deleted_accounts").fetchall() == [
        (deletion.address_digest(settings.secret_keys, ann), "operator")]
    assert conn.execute("SELECT count(*) FROM email_jobs WHERE recipient = %s",
                        (ann,)).fetchone() == (0,)
    # The address is free again.
    confirmed(api, conn, svc, ann, "a fresh start 55")


@pytest.mark.parametrize("command", ["show", "delete"])
def test_an_address_without_an_account_is_one_line_and_exit_1(env, command):
    result = _run(["users", command, "nobody@example.com"], env)
    assert result.exit_code == 1
    assert result.output == "Error: no account uses nobody@example.com\n"


@pytest.mark.parametrize("command", ["show", "delete"])
@pytest.mark.parametrize("address", ["not an address", "Ann <ann@example.com>", "a(b)@x.com", ""])
def test_a_malformed_address_is_named_with_exit_2(env, command, address):
    result = _run(["users", command, address], env)
    assert result.exit_code == 2, result.output
    assert "Invalid value for ADDRESS" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [["users", "show"], ["users", "delete"],
                                  ["users", "show", "a@example.com", "b@example.com"],
                                  ["users", "remove", "a@example.com"]])
def test_missing_extra_or_unknown_arguments_are_usage_errors(env, args):
    result = _run(args, env)
    assert result.exit_code == 2, result.output
    assert "Usage:" in result.output and "Traceback" not in result.output
