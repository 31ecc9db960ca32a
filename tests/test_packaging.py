"""The wheel is self-contained: templates, migrations and data ship inside it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # builds and installs wheels with pip

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_carries_templates_migrations_and_data(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    wheel = next(tmp_path.glob("authsvc-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "authsvc/_shipped/migrations/0026_baseline.sql" in names
    assert "authsvc/data/common-passwords.txt" in names
    assert any(n.startswith("authsvc/_shipped/templates/") for n in names)
    # Every catalog compiled into it (hatch_build.py), whether or not make compiled it here.
    catalogs = {n.removesuffix(".po") for n in names
                if n.startswith("authsvc/_shipped/translations/") and n.endswith(".po")}
    assert catalogs and {f"{c}.mo" for c in catalogs} <= names
    assert any(n.startswith("authsvc/worker/") for n in names)
    assert "authsvc/worker/providers/resend.py" in names
    # Each table owner's SQL ships beside it; no second top-level package.
    assert {"authsvc/accounts/users.sql", "authsvc/worker/jobs.sql"} <= names
    assert {n.split("/")[0] for n in names if n.endswith(".py")} == {"authsvc"}
    # Test tools (the local Resend-like provider) stay out of the runtime.
    assert not any(n.startswith(("tools/", "tests/", "chaos/", "bench/")) for n in names)

    # Imported from the unpacked wheel (not the checkout), the package finds
    # its shipped folders.
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    probe = (
        "import authsvc.resources as r, authsvc.db.migrate as m;"
        "print(r.migrations_dir()); print(r.templates_dir()); print(len(m.available_migrations()));"
        "import authsvc.locales as l; print(l.translations('de', 'pages').gettext('Log in'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(unpacked)},
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.splitlines()
    assert out[0] == str(unpacked / "authsvc/_shipped/migrations")
    assert out[1] == str(unpacked / "authsvc/_shipped/templates")
    # schema.sql ships beside them but is not a migration (tools/schema_sql.py).
    assert int(out[2]) == len(list((ROOT / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")))
    assert out[3] == "Anmelden"
