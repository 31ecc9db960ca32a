"""ScopedInbox alone: a standard-library-only wheel, and bodies too large to be listed."""

from __future__ import annotations

import smtplib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from authsvc.accounts import actions
from authsvc.testing import InboxError, ScopedInbox
from tests.inbox_support import HttpClient, email, running_sink, send
from tests.inbox_ui_support import links_in_each_state, send_links_email

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
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if not n.startswith("authsvc_")) == ["scoped_inbox.py"]
    # pytest finds the fixture by itself: a pytest11 entry point naming the module.
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert zipfile.ZipFile(wheel).read(entry_points).decode().split() == [
        "[pytest11]", "scoped_inbox", "=", "scoped_inbox"]
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


def test_scoped_inbox_reads_codes_and_link_states_and_sets_faults(inbox, sink, conn, svc):
    scoped = ScopedInbox(inbox.url)
    scoped.new_scope()
    links = links_in_each_state(conn, svc)
    send_links_email(sink.port, str(scoped.scope), links)
    found = scoped.expect_one(settle=0)
    assert found.code == "123456" and scoped.code(found) == "123456"
    assert [(s.url, s.state) for s in found.link_states] == [
        (links[state], state) for state in ("used", "superseded", "would_redeem")
    ]
    fresh = links["would_redeem"]
    assert scoped.link_state(fresh) == "would_redeem"
    assert scoped.link_state(fresh) == "would_redeem"  # reading used nothing up
    actions.reset_password(conn, svc, token=fresh.split("token=")[1], password="a new passphrase!")
    assert scoped.link_state(fresh) == "used"
    with pytest.raises(InboxError, match="no authsvc link"):
        scoped.link_state("https://elsewhere.example/?token=x")

    scoped.fault("451 4.3.0 Try again later", count=1)
    with pytest.raises(smtplib.SMTPRecipientsRefused):
        send(sink.port, email(scoped.address(), subject="refused"))
    scoped.fault("550 5.1.1 No such user", count=5)
    scoped.clear_faults()
    send(sink.port, email(scoped.address(), subject="stored"))
    assert scoped.expect_one(settle=0).subject == "stored"
    with pytest.raises(InboxError, match="setting a fault failed: 400"):
        scoped.fault("250 not a refusal")
