"""A command pointed at a data dir with no embedded database says so; it creates none there.

Only `authsvc dev` and `authsvc db upgrade` start a new embedded PostgreSQL:
any other command run from the wrong folder, or with a mistyped
AUTHSVC_DATA_DIR, would otherwise initialise an empty server there and then
fail on a missing schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from authsvc.cli import main
from tests.conftest import TEST_KEY


@pytest.mark.parametrize("args", [["users", "show", "ann@example.com"], ["outbox", "stats"],
                                  ["operators", "list"], ["apps", "list"], ["worker", "--once"],
                                  ["suppressions", "list"]])
def test_a_command_on_an_empty_data_dir_names_it_and_creates_nothing(tmp_path: Path, args):
    data_dir = tmp_path / "typo"
    env = {"AUTHSVC_ENV": "development", "AUTHSVC_DATABASE_URL": "",
           "AUTHSVC_DIRECT_DATABASE_URL": "", "AUTHSVC_DATA_DIR": str(data_dir),
           "AUTHSVC_SECRET_KEYS": TEST_KEY}
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 1, result.output
    assert f"no database in {data_dir}" in result.output
    assert "authsvc dev" in result.output
    assert not (data_dir / "pgdata").exists()


def test_check_says_it_on_the_database_line(tmp_path: Path):
    env = {"AUTHSVC_ENV": "development", "AUTHSVC_DATABASE_URL": "",
           "AUTHSVC_DIRECT_DATABASE_URL": "", "AUTHSVC_DATA_DIR": str(tmp_path),
           "AUTHSVC_SECRET_KEYS": TEST_KEY}
    result = CliRunner().invoke(main, ["check"], env=env)
    assert result.exit_code == 1
    [line] = [x for x in result.output.splitlines() if " database " in x]
    assert line.startswith("FAIL") and f"no database in {tmp_path}" in line
