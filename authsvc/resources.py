"""Where the shipped templates and migrations are, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _locate(name: str) -> Path:
    # A wheel carries them under authsvc/_shipped/; a source checkout (or an
    # editable install) has them at the repository root.
    for candidate in (_PACKAGE / "_shipped" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find the {name!r} folder next to {_PACKAGE}")


def migrations_dir() -> Path:
    return _locate("migrations")


def templates_dir() -> Path:
    return _locate("templates")


def translations_dir() -> Path:
    return _locate("translations")


def data_file(name: str) -> Path:
    return _PACKAGE / "data" / name
