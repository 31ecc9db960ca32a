"""ScopedInbox alone: a standard-library-only wheel, and bodies too large to be listed."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from authsvc.testing import ScopedInbox
from tests.inbox_support import HttpClient, email, running_sink, send

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def served(inbox: HttpClient) -> str:
    return inbox.url


@pytest.mark.e2e
def test_the_client_wheel_installs_alone_and_needs_only_the_standard_library(
    tmp_path, served, pool
):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(ROOT / "clients" / "scoped-inbox")],
        check=True, timeout=120, capture_output=True,
    )
    [wheel] = tmp_path.glob("authsvc_scoped_inbox-*.whl")
    assert sorted(n for n in zipfile.ZipFile(wheel).namelist() if not n.startswith("authsvc_"))\
        == ["scoped_inbox.py"]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # -I -S: no site-packages at all, so only the standard library can be imported.
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from scoped_inbox import ScopedInbox\n"
        "inbox = ScopedInbox(sys.argv[2]); inbox.new_scope(); print(inbox.address('qa'))\n"
        "sys.stdout.flush(); print(inbox.expect_one(timeout=20, settle=0).subject)\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('authsvc', 'pytest')]\n"
    )
    with running_sink(pool) as sink:
        client = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", script, str(site), served],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        assert client.stdout is not None
        address = client.stdout.readline().strip()
        send(sink.port, email(address, subject="standalone"))
        out, err = client.communicate(timeout=60)
    assert client.returncode == 0, err
    assert out.strip() == "standalone"


def test_expect_one_and_messages_fetch_a_body_left_out_of_the_listing(served, pool):
    inbox = ScopedInbox(served)
    inbox.new_scope()
    with running_sink(pool) as sink:
        send(sink.port, email(inbox.address(), text="big " + "b" * (2 * 1024 * 1024)))
        found = inbox.expect_one(settle=0)
    assert found.text is not None and len(found.text) > 2 * 1024 * 1024
    assert [len(m.text or "") for m in inbox.messages()] == [len(found.text)]
