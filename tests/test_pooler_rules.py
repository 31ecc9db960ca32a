"""Pooler safety as a rule of the source (SPEC §11), so a new module cannot quietly break it.

Through a transaction pooler a session's state stays on a server connection
someone else gets next, so the shipped code (authsvc/ and migrations/)
may not: connect without authsvc.db.connections (which turns off psycopg's automatic
prepared statements), take a session-level advisory lock, or SET a session
setting outside a transaction (SET LOCAL / set_config(..., true) are fine).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = [ROOT / "authsvc"]
CONNECTORS = {"connect", "ConnectionPool", "AsyncConnectionPool"}


def _python_files() -> list[Path]:
    return sorted(p for folder in SHIPPED for p in folder.rglob("*.py"))


def _sql_texts() -> list[tuple[Path, str]]:
    files = sorted(p for folder in [*SHIPPED, ROOT / "migrations"] for p in folder.rglob("*.sql"))
    texts = [(p, p.read_text(encoding="utf-8")) for p in files]
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append((path, node.value))
    return texts


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        base = func.value
        prefix = base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
        return f"{prefix}.{func.attr}"
    return func.id if isinstance(func, ast.Name) else ""


def test_every_connection_is_made_by_authsvc_db_connections():
    offenders = []
    for path in _python_files():
        if path == ROOT / "authsvc" / "db" / "connections.py":
            continue
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Call):
                continue
            name = _callee(node)
            direct = name in {"psycopg.connect", "AsyncConnection.connect",
                              "Connection.connect"}
            pool = name.split(".")[-1] in {"ConnectionPool", "AsyncConnectionPool"}
            passes_safe = any(
                isinstance(kw.value, ast.Call | ast.Dict | ast.Name)
                and "POOLER_SAFE" in ast.unparse(kw.value)
                for kw in node.keywords if kw.arg == "kwargs"
            )
            if direct or (pool and not passes_safe):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert offenders == [], "connect through authsvc.db (prepare_threshold=None)"


def test_no_session_advisory_lock():
    session_lock = re.compile(r"pg_(try_)?advisory_lock(_shared)?\s*\(", re.IGNORECASE)
    found = [str(p.relative_to(ROOT)) for p, text in _sql_texts() if session_lock.search(text)]
    assert found == [], "use pg_advisory_xact_lock: a session lock outlives the transaction"


def _statements(text: str) -> list[str]:
    """The statements of an SQL text, comments removed, each stripped."""
    without_comments = re.sub(r"--[^\n]*", "", text)
    return [part.strip() for part in without_comments.split(";") if part.strip()]


def _session_set(statement: str) -> bool:
    # SET LOCAL / SET CONSTRAINTS / SET TRANSACTION end with the transaction.
    # Upper-case SET followed by a setting name and = or TO (so prose such as
    # "Set a password" in a Python string is not a statement).
    return bool(re.match(
        r"SET\s+(?!LOCAL\b|CONSTRAINTS\b|TRANSACTION\b)(SESSION\s+)?\w+(\.\w+)?\s*(=|TO\b)",
        statement,
    ))


def test_no_session_set_outside_a_transaction():
    found = [str(p.relative_to(ROOT)) for p, text in _sql_texts()
             if any(_session_set(statement) for statement in _statements(text))]
    assert found == [], "SET LOCAL inside the transaction, never a session SET"


def test_the_rules_catch_what_they_are_for():
    """The patterns above match the shapes they forbid (so the rules can fail)."""
    assert re.search(r"pg_(try_)?advisory_lock(_shared)?\s*\(", "SELECT pg_advisory_lock(1)")
    assert not re.search(r"pg_(try_)?advisory_lock(_shared)?\s*\(",
                         "SELECT pg_advisory_xact_lock(1)")
    assert _session_set("SET statement_timeout = '5s'")
    assert not _session_set("SET LOCAL statement_timeout = '5s'")
    assert not any(map(_session_set, _statements("UPDATE t\nSET a = 1;")))
    call = ast.parse("psycopg.connect(url)").body[0].value  # type: ignore[attr-defined]
    assert _callee(call) == "psycopg.connect"
