"""The `authsvc` command's edges: one driver-error boundary, --version, empty listings, busy ports.

Run in-process with click's runner (no child process): every command that
needs the database says the same one line when it cannot reach it or when
the schema is behind, with no traceback.
"""

from __future__ import annotations

import importlib.metadata
import signal
import socket
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

import authsvc
from authsvc.cli import main
from testkit.waiting import free_port

UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"

# Every command that talks to the database, with arguments that get it that far.
DATABASE_COMMANDS = {
    "db-upgrade": ["db", "upgrade"],
    "apps-create": ["apps", "create", "Shop", "--redirect-url", "https://x.example"],
    "outbox-stats": ["outbox", "stats"],
    "outbox-list": ["outbox", "list"],
    "outbox-show": ["outbox", "show", "1"],
    "outbox-redrive": ["outbox", "redrive", "1"],
    "outbox-prune": ["outbox", "prune", "--older-than", "30d"],
    "outbox-recount": ["outbox", "recount"],
    "worker": ["worker", "--once", "--wait-for-database", "0"],
    "serve": ["serve", "--bind", "127.0.0.1:0"],
    "inbox": ["inbox", "--port", "9"],  # never bound: the database check comes first
    "users-show": ["users", "show", "ann@example.com"],
    "users-delete": ["users", "delete", "ann@example.com"],
    "operators-add": ["operators", "add", "ann@example.com"],
    "operators-remove": ["operators", "remove", "ann@example.com"],
    "operators-list": ["operators", "list"],
    "operators-log": ["operators", "log", "--json"],
}


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> Iterator[None]:
    """The commands install SIGTERM/SIGINT handlers; give pytest its own back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def _run(args: list[str], env: dict[str, str]) -> Result:
    return CliRunner().invoke(main, args, env={"AUTHSVC_TEST_INBOX": "on", **env})


def _one_error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.mark.parametrize("args", DATABASE_COMMANDS.values(), ids=DATABASE_COMMANDS.keys())
def test_every_command_says_the_same_line_when_the_database_is_unreachable(env, args):
    line = _one_error_line(_run(args, {**env, "AUTHSVC_DATABASE_URL": UNREACHABLE}))
    assert line.startswith("Error: cannot reach the database: "), line


@pytest.mark.parametrize(
    "args",
    [DATABASE_COMMANDS[name] for name in ("apps-create", "outbox-stats", "outbox-list",
                                          "outbox-show", "outbox-prune", "outbox-recount",
                                          "worker", "inbox", "users-show", "users-delete",
                                          "operators-add", "operators-list", "operators-log")],
    ids=["apps-create", "outbox-stats", "outbox-list", "outbox-show", "outbox-prune",
         "outbox-recount", "worker", "inbox", "users-show", "users-delete", "operators-add",
         "operators-list", "operators-log"],
)
def test_every_command_on_an_unmigrated_database_says_to_upgrade(env, empty_database_url, args):
    line = _one_error_line(_run(args, {**env, "AUTHSVC_DATABASE_URL": empty_database_url}))
    assert "run `authsvc db upgrade`" in line, line


def test_a_schema_one_migration_behind_is_named_not_dumped(env, conn):
    """A query whose function a newer migration adds: the boundary says to upgrade."""
    conn.execute("DROP FUNCTION outbox_job_due")
    line = _one_error_line(_run(["outbox", "stats"], env))
    assert "run `authsvc db upgrade`" in line, line


def test_version_is_the_installed_distributions(env):
    result = CliRunner().invoke(main, ["--version"], env={"AUTHSVC_DATABASE_URL": UNREACHABLE})
    assert result.exit_code == 0
    version = importlib.metadata.version("authsvc")
    assert result.output == f"authsvc {version}\n"
    assert authsvc.__version__ == version


@pytest.mark.parametrize(("args", "says"), [([], "no jobs"), (["--status", "failed"],
                                                              "no failed jobs")])
def test_outbox_list_says_when_there_are_no_jobs(env, args, says):
    result = _run(["outbox", "list", *args], env)
    assert result.exit_code == 0, result.output
    assert result.output == says + "\n"


@pytest.mark.parametrize("busy", ["--port", "--smtp-port"])
def test_dev_on_a_busy_port_refuses_before_touching_the_data_dir(env, tmp_path, busy):
    data_dir = tmp_path / "fresh-data"
    dev_env = {k: v for k, v in env.items() if k != "AUTHSVC_SECRET_KEYS"}
    dev_env["AUTHSVC_DATA_DIR"] = str(data_dir)  # no key: loading settings would write one
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        # Free, and below the ephemeral range: no other test's connection takes it meanwhile.
        spare = free_port()
        ports = {"--port": spare, "--smtp-port": spare, busy: taken.getsockname()[1]}
        result = _run(["dev", "--port", str(ports["--port"]),
                       "--smtp-port", str(ports["--smtp-port"])], dev_env)
        line = _one_error_line(result)
    assert line == (
        f"Error: port {ports[busy]} is already in use; pick another with {busy}"
    )
    assert not data_dir.exists(), sorted(p.name for p in data_dir.rglob("*"))


@pytest.mark.parametrize(
    "args", [a for name, a in DATABASE_COMMANDS.items() if name != "db-upgrade"],
    ids=[name for name in DATABASE_COMMANDS if name != "db-upgrade"])
def test_a_command_pointed_at_an_empty_data_dir_says_so_and_creates_nothing(env, tmp_path, args):
    data_dir = tmp_path / "elsewhere"
    empty = {k: v for k, v in env.items()
             if k not in ("AUTHSVC_DATABASE_URL", "AUTHSVC_DIRECT_DATABASE_URL")}
    line = _one_error_line(_run(args, {**empty, "AUTHSVC_DATA_DIR": str(data_dir)}))
    assert line.startswith(f"Error: no database in {data_dir}: AUTHSVC_DATABASE_URL is unset"), line
    assert not (data_dir / "pgdata").exists()
