"""The layering the README promises, checked on the source: who may import what.

The web layer never sends mail; the worker never renders pages or imports
Flask; table definitions live only in migrations/.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _offenders(folder: str, forbidden: re.Pattern[str]) -> dict[str, list[str]]:
    found = {}
    for path in _modules(folder):
        bad = sorted(name for name in _imports(path) if forbidden.match(name))
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


@pytest.mark.parametrize("folder", ["authsvc/api", "authsvc/pages"])
def test_web_layer_never_sends_mail(folder):
    assert _modules(folder), folder
    assert _offenders(folder, re.compile(r"^(smtplib|aiosmtplib|worker)(\.|$)")) == {}


def test_worker_never_imports_flask_or_the_web_layer():
    assert _modules("worker")
    forbidden = re.compile(r"^(flask|flask_wtf|werkzeug|authsvc\.(api|pages|inbox|web|app))(\.|$)")
    assert _offenders("worker", forbidden) == {}


def _core_files(name: str) -> list[Path]:
    """authsvc/<name>.py, or every module of the package authsvc/<name>/."""
    module = ROOT / "authsvc" / f"{name}.py"
    files = [module] if module.exists() else _modules(f"authsvc/{name}")
    assert files, name
    return files


def test_core_modules_do_not_import_flask():
    """Use cases and table owners stay usable from the worker and the CLI."""
    core = [
        "accounts",
        "users",
        "tokens",
        "passwords",
        "outbox",
        "ratelimit",
        "app_keys",
        "idempotency",
        "config",
        "db",
        "migrate",
        "queries",
        "addresses",
        "sessions",
        "services",
        "problem_documents",
        "durations",  # the worker says how long a link lives with it
    ]
    flask = re.compile(r"^(flask|flask_wtf|werkzeug)(\.|$)")
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if flask.match(n))
        for name in core
        for path in _core_files(name)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


DDL = re.compile(
    r"\b(CREATE|ALTER|DROP)\s+(OR\s+REPLACE\s+)?(TABLE|INDEX|UNIQUE\s+INDEX|VIEW|FUNCTION"
    r"|TYPE|SEQUENCE|TRIGGER|SCHEMA|EXTENSION)\b",
    re.IGNORECASE,
)


def _ddl_offenders(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths if DDL.search(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("suffix", ["*.sql", "*.py"])
def test_schema_is_defined_only_in_migrations(suffix):
    """No table, index or function is created from code: migrations/ is the one schema."""
    files = [path for folder in ("authsvc", "worker") for path in (ROOT / folder).rglob(suffix)]
    assert files
    assert _ddl_offenders(files) == []


def test_the_ddl_check_sees_ddl_in_python():
    """The check is not vacuous: a runner creating its own table (as migrate.py did) is caught."""
    assert DDL.search('conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (v text)")')
    assert DDL.search("CREATE OR REPLACE FUNCTION outbox_job_due")


def test_the_token_codec_is_built_in_one_place():
    """Web app and worker sign and read links with the same keys and lifetimes."""
    built = [
        str(path.relative_to(ROOT))
        for folder in ("authsvc", "worker")
        for path in _modules(folder)
        if "TokenCodec(" in path.read_text(encoding="utf-8")
    ]
    assert built == ["authsvc/services.py"]
