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
        "durations",  # the worker says how long a link lives with it
    ]
    flask = re.compile(r"^(flask|flask_wtf|werkzeug)(\.|$)")
    offenders = {
        name: sorted(n for n in _imports(ROOT / "authsvc" / f"{name}.py") if flask.match(n))
        for name in core
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_tables_are_defined_only_in_migrations():
    ddl = re.compile(r"\b(CREATE|ALTER|DROP)\s+(TABLE|INDEX)\b", re.IGNORECASE)
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("authsvc", "worker")
        for path in (ROOT / folder).rglob("*.sql")
        if ddl.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
