"""The README's map of the code names every module, and names none that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = ("authsvc",)


def _map_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Architecture\n", 1)[1].split("```\n", 2)[1]
    return block.splitlines()


def named_in_map(lines: list[str]) -> set[str]:
    """Every module path the map names: `name.py` under the folders it is indented in."""
    folders: list[tuple[int, str]] = []  # (indent, folder) from the top down
    named: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        first = line.split()[0]
        folders = [(i, f) for i, f in folders if i < indent]
        if first.endswith("/"):
            folders.append((indent, first))
            continue
        # The module names lead the line: `a.py`, or `a.py, b.py, c.py   what they are`.
        lead = re.match(r"\s*((?:[\w]+\.py,?\s*)+)", line)
        if lead:
            prefix = "".join(f for _, f in folders)
            named.update(prefix + name for name in re.findall(r"[\w]+\.py", lead.group(1)))
    return named


def modules() -> set[str]:
    return {
        str(path.relative_to(ROOT))
        for package in MAPPED
        for path in (ROOT / package).rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py") and "__pycache__" not in path.parts
    }


def test_the_map_names_every_module_and_no_other():
    named = {n for n in named_in_map(_map_lines()) if n.startswith(MAPPED)}
    assert sorted(modules() - named) == [], "modules missing from the README's map"
    assert sorted(named - modules()) == [], "the README's map names modules that are gone"


def test_the_map_reader_follows_folders_and_lists():
    lines = [
        "authsvc/          core",
        "  a.py            one",
        "  pkg/            a package",
        "    b.py          two",
        "    c.py, d.py    three and four",
        "  e.py            back at the top",
        "authsvc/worker/           the worker",
        "  f.py            five (g.py named in the text is not a module line)",
    ]
    assert named_in_map(lines) == {
        "authsvc/a.py", "authsvc/pkg/b.py", "authsvc/pkg/c.py", "authsvc/pkg/d.py",
        "authsvc/e.py", "authsvc/worker/f.py",
    }
