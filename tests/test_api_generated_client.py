"""The OpenAPI document is usable as it comes: a generated client runs the flows.

`openapi-python-client` generates a client from the document a live server
(gunicorn, a worker, the test-inbox sink: real processes) serves; the test
then signs up, confirms with the emailed code, resets with the emailed link
and checks the new password, only through the generated code.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.request import urlopen

import pytest

from authsvc.apps.keys import register_app
from authsvc.testing import ScopedInbox
from testkit.stack import running_stack

pytestmark = [pytest.mark.e2e]
PACKAGE = "authsvc_generated_client"
PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture
def live_server(env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """gunicorn, one worker and the SMTP sink, as separate processes."""
    with running_stack(env, tmp_path / "stack.log") as url:
        yield url


def _generate(server: str, folder: Path) -> ModuleType:
    """Generate the client package from the served document and import it."""
    with urlopen(f"{server}/api/v1/openapi.json", timeout=10) as response:  # noqa: S310
        (folder / "openapi.json").write_bytes(response.read())
    tool = Path(sys.executable).with_name("openapi-python-client")
    # The tool formats its output with ruff, found on PATH beside it.
    path = f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = subprocess.run(
        [str(tool), "generate", "--path", "openapi.json", "--meta", "none",
         "--output-path", PACKAGE],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": path}, check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Warning" not in output, output  # nothing of the document was skipped
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))


def test_generated_client_signs_up_verifies_by_code_and_resets(live_server, conn, tmp_path):
    generated = _generate(live_server, tmp_path)
    api = importlib.import_module(f"{PACKAGE}.api")
    models = importlib.import_module(f"{PACKAGE}.models")
    calls = {
        name: importlib.import_module(f"{PACKAGE}.api.{module}")
        for name, module in {
            "sign_up": "signups.sign_up",
            "confirm_verification": "verifications.confirm_verification",
            "request_password_reset": "password_resets.request_password_reset",
            "confirm_password_reset": "password_resets.confirm_password_reset",
            "check_credentials": "sessions.check_credentials",
        }.items()
    }
    assert api is not None
    with conn.transaction():
        _app, key = register_app(conn, "generated", [live_server])
    client = generated.AuthenticatedClient(base_url=live_server, token=key)
    inbox = ScopedInbox(live_server)
    email = inbox.address("ann")

    sent = calls["sign_up"].sync(client=client, body=models.SignupRequest(email=email,
                                                                          password=PASSWORD))
    assert isinstance(sent, models.VerificationSent), sent
    code = inbox.code(inbox.expect_one(timeout=30))

    wrong = calls["confirm_verification"].sync_detailed(
        client=client,
        body=models.VerificationConfirm(email=email, code=f"{(int(code) + 1) % 10**6:06d}"),
    )
    assert wrong.status_code == 400
    # Each answer's problem is its own type, `code` an enum of what that answer carries.
    assert type(wrong.parsed).__name__ == "InvalidRequestInvalidTokenInvalidCodeProblem"
    assert wrong.parsed.code.value == "invalid_code"

    verified = calls["confirm_verification"].sync(
        client=client, body=models.VerificationConfirm(email=email, code=code)
    )
    assert isinstance(verified, models.Verified) and verified.email == email

    accepted = calls["request_password_reset"].sync(
        client=client, body=models.LinkRequest(email=email), idempotency_key="reset-1"
    )
    assert isinstance(accepted, models.Accepted)
    link = inbox.link(inbox.expect_one(timeout=30), containing="token=")
    token = link.split("token=", 1)[1]
    changed = calls["confirm_password_reset"].sync(
        client=client, body=models.PasswordResetConfirm(token=token, password=NEW_PASSWORD)
    )
    assert isinstance(changed, models.PasswordChanged), changed

    checked = calls["check_credentials"].sync(
        client=client, body=models.SessionRequest(email=email, password=NEW_PASSWORD)
    )
    assert isinstance(checked, models.CredentialsChecked) and checked.user.email == email
    refused = calls["check_credentials"].sync(
        client=client, body=models.SessionRequest(email=email, password=PASSWORD)
    )
    assert type(refused).__name__ == "UnauthorizedInvalidCredentialsProblem"
    assert refused.code.value == "invalid_credentials"
    document = json.loads((tmp_path / "openapi.json").read_text())
    assert document["servers"][0]["url"] == live_server
