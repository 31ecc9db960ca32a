"""TOTP for the console (RFC 6238): the reference vectors, drift, sealing, signing in."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from authsvc.cli import main
from authsvc.operators import totp
from tests.accounts_support import one_number
from tests.console_support import (
    OPERATOR,
    code_step,
    console_sign_in,
    make_operator,
    password_step,
)
from tests.pages_support import make_account

# RFC 6238 appendix B, SHA-1: the ASCII secret "12345678901234567890", 8 digits there;
# the last six of each are the 6-digit codes.
RFC_SECRET = b"12345678901234567890"
RFC_VECTORS = [(59, "94287082"), (1111111109, "07081804"), (1111111111, "14050471"),
               (1234567890, "89005924"), (2000000000, "69279037"), (20000000000, "65353130")]


@pytest.mark.parametrize(("seconds", "eight_digits"), RFC_VECTORS)
def test_the_rfc_6238_reference_codes(seconds, eight_digits):
    assert totp.code_at(RFC_SECRET, seconds // 30) == eight_digits[-6:]


def test_one_step_of_drift_either_side_and_no_more():
    now = datetime.fromtimestamp(1111111111, UTC)
    step = totp.step_of(now)
    for offset in (-1, 0, 1):
        assert totp.matching_step(RFC_SECRET, totp.code_at(RFC_SECRET, step + offset), now) \
            == step + offset
    for offset in (-2, 2):
        assert totp.matching_step(RFC_SECRET, totp.code_at(RFC_SECRET, step + offset), now) \
            is None


def test_sealed_for_one_operator_opens_for_them_only_and_across_a_rotation():
    keys = ("k" * 40,)
    secret = totp.new_secret()
    sealed = totp.seal(keys, 7, secret)
    assert secret not in sealed
    assert totp.open_sealed(("new" * 20, *keys), 7, sealed) == secret
    with pytest.raises(totp.SealedTotpError):
        totp.open_sealed(keys, 8, sealed)


def test_the_provisioning_uri_carries_the_base32_secret():
    uri = totp.provisioning_uri(RFC_SECRET, "op@example.com")
    assert uri.startswith("otpauth://totp/authsvc%20console%3Aop%40example.com?")
    assert f"secret={totp.base32(RFC_SECRET)}" in uri and "period=30" in uri


def _set_up(env: dict[str, str], email: str = OPERATOR) -> bytes:
    result = CliRunner().invoke(main, ["operators", "totp", email], env=env)
    assert result.exit_code == 0, result.output
    found = re.search(r"^secret: ([A-Z2-7]+)$", result.output, re.MULTILINE)
    assert found is not None
    text = found.group(1)
    return base64.b32decode(text + "=" * (-len(text) % 8))


def test_an_operator_with_totp_signs_in_with_the_authenticators_code(app, conn, svc, env, clock):
    make_operator(conn, svc)
    secret = _set_up(env)
    assert conn.execute("SELECT totp_secret FROM operators").fetchone()[0] != secret
    browser = app.test_client()
    assert password_step(browser).status_code == 303
    assert one_number(conn, "SELECT count(*) FROM email_jobs WHERE template = 'console_code'") \
        == 0
    code = totp.code_at(secret, totp.step_of(clock()))
    assert code_step(browser, code).headers["Location"] == "/admin/"
    # The same code, in a sign-in of its own: a step is used once.
    again = app.test_client()
    password_step(again)
    assert code_step(again, code).status_code == 422
    clock.advance(30)
    assert code_step(again, totp.code_at(secret, totp.step_of(clock()))) \
        .headers["Location"] == "/admin/"


def test_totp_removed_goes_back_to_emailed_codes(app, conn, svc, env):
    make_operator(conn, svc)
    _set_up(env)
    removed = CliRunner().invoke(main, ["operators", "totp", OPERATOR, "--remove"], env=env)
    assert removed.exit_code == 0, removed.output
    console_sign_in(app.test_client(), conn, svc)
    listed = CliRunner().invoke(main, ["operators", "list"], env=env).output
    assert "email code" in listed


def test_totp_is_only_for_operators(conn, svc, env):
    make_account(conn, svc, "ann@example.com")
    result = CliRunner().invoke(main, ["operators", "totp", "ann@example.com"], env=env)
    assert result.exit_code == 1 and "not an operator" in result.output
    assert "secret" not in result.output
