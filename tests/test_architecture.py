"""The layering the README promises, checked on the source: who may import what.

The web layer never sends mail; the worker never renders pages or imports
Flask; table definitions live only in migrations/.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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


def test_web_layer_never_sends_mail():
    assert _modules("authsvc/web")
    forbidden = re.compile(r"^(smtplib|aiosmtplib|authsvc\.worker)(\.|$)")
    assert _offenders("authsvc/web", forbidden) == {}


def test_worker_never_imports_flask_or_the_web_layer():
    assert _modules("authsvc/worker")
    forbidden = re.compile(r"^(flask|flask_wtf|werkzeug|authsvc\.(web|inbox))(\.|$)")
    assert _offenders("authsvc/worker", forbidden) == {}


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
        "apps",
        "app_events",
        "outbox",
        "db",
        "ratelimit",
        "config",
        "services",
        "clock",
        "resources",
        "problem_documents",
        "durations",  # the worker says how long a link lives with it
        "worker",
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
    files = [path for path in (ROOT / "authsvc").rglob(suffix)]
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
        for path in _modules("authsvc")
        if "TokenCodec(" in path.read_text(encoding="utf-8")
    ]
    assert built == ["authsvc/services.py"]


# The same rules over the whole import graph: a module may not reach what it
# may not import through any chain, including the package __init__ files an
# import runs first (importing authsvc.cli.worker runs authsvc/cli/__init__.py).
PROJECT_PACKAGES = ("authsvc",)
WEB_ONLY = re.compile(r"^(flask|flask_wtf|werkzeug|authsvc\.(web|inbox))(\.|$)")
SENDS_MAIL = re.compile(r"^(smtplib|aiosmtplib|authsvc\.worker)(\.|$)")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Project module -> every module its import statements load (external ones as named)."""
    files = {_module_name(p): p for pkg in PROJECT_PACKAGES for p in _modules(pkg)}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets.add(base)
                # `from pkg import mod` loads pkg.mod when it is a module.
                targets.update(f"{base}.{a.name}" for a in node.names
                               if f"{base}.{a.name}" in files)
        loaded: set[str] = set()
        for target in targets:
            parts = target.split(".")
            # Importing a.b.c runs a/__init__, a/b/__init__, then a/b/c.
            loaded.update(".".join(parts[: i + 1]) for i in range(len(parts)))
        graph[name] = {t for t in loaded if t != name}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> dict[str, str]:
    """Everything `start` loads, each with the module that first imported it (for the message)."""
    seen: dict[str, str] = {}
    parts = start.split(".")
    todo = [".".join(parts[: i + 1]) for i in range(len(parts))]
    while todo:
        current = todo.pop()
        for target in graph.get(current, ()):
            if target not in seen:
                seen[target] = current
                todo.append(target)
    return seen


def _chain(seen: dict[str, str], start: str, end: str) -> str:
    path = [end]
    while path[-1] in seen and path[-1] != start:
        path.append(seen[path[-1]])
    return " <- ".join(path)


@pytest.mark.parametrize(
    "start", ["authsvc.worker.loop", "authsvc.cli.worker", "authsvc.worker.delivery"])
def test_the_worker_never_reaches_flask_through_any_chain(start):
    graph = _import_graph()
    assert start in graph
    seen = _reachable(graph, start)
    bad = sorted(_chain(seen, start, m) for m in seen if WEB_ONLY.match(m))
    assert bad == []


@pytest.mark.parametrize("start", ["authsvc.web.api", "authsvc.web.pages", "authsvc.web.app"])
def test_the_web_layer_never_reaches_mail_sending_through_any_chain(start):
    graph = _import_graph()
    seen = _reachable(graph, start)
    assert seen, start
    assert sorted(_chain(seen, start, m) for m in seen if SENDS_MAIL.match(m)) == []


FLASK = re.compile(r"^(flask|flask_wtf|werkzeug|authsvc\.web)(\.|$)")


@pytest.mark.parametrize("start", ["authsvc.inbox.server", "authsvc.cli.inbox"])
def test_the_inbox_server_never_reaches_flask_through_any_chain(start):
    """/_inbox has one server, the inbox's aiohttp one: nothing of the Flask app is in it."""
    graph = _import_graph()
    assert start in graph
    seen = _reachable(graph, start)
    assert sorted(_chain(seen, start, m) for m in seen if FLASK.match(m)) == []


def test_the_graph_check_follows_package_inits():
    """Not vacuous: before commands loaded lazily, cli/__init__ pulled Flask into the worker."""
    graph = {"authsvc.cli": {"authsvc.cli.dev"}, "authsvc.cli.dev": {"flask"},
             "authsvc.cli.worker": {"authsvc.cli", "authsvc.worker"}, "authsvc": set()}
    seen = _reachable(graph, "authsvc.cli.worker")
    assert "flask" in seen
    assert _chain(seen, "authsvc.cli.worker", "flask") == (
        "flask <- authsvc.cli.dev <- authsvc.cli <- authsvc.cli.worker")


@pytest.mark.e2e
def test_the_worker_process_loads_no_flask(tmp_path):
    """The real `authsvc worker` entry point, as far as its option parsing: no Flask in memory."""
    probe = (
        "import sys\n"
        "from authsvc.cli import main\n"
        "try:\n"
        "    main(['worker', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('flask', 'werkzeug'))\n"
        "print('LOADED', loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, check=False)
    assert "LOADED []" in done.stdout, done.stdout + done.stderr


def test_every_page_flow_takes_its_emails_locale_from_one_place():
    """A page that queues an email passes `locale=email_locale()` (pages/language.py),
    the one rule for which language a page's emails are in; nothing else, such as an
    attribute of flask.g that nothing sets."""
    passed: dict[str, list[str]] = {}
    for path in _modules("authsvc/web/pages"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or ast.unparse(node.func).startswith("format_"):
                continue  # Babel's formatting takes the page's own locale
            for keyword in node.keywords:
                if keyword.arg == "locale":
                    passed.setdefault(str(path.relative_to(ROOT)), []).append(
                        ast.unparse(keyword.value))
    assert len(passed) >= 7  # signup, reset, resend, codes, link requests, change, deletion
    assert {value for values in passed.values() for value in values} == {"email_locale()"}
