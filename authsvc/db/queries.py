"""Named SQL blocks loaded from .sql files that sit beside their owning module.

A file holds blocks of the form::

    -- claim_batch --
    -- One-line intent.
    SELECT ...;

and `load_queries` returns them as a name → text mapping.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import LiteralString, cast

_HEADER = re.compile(r"^-- ([a-z_][a-z0-9_]*) --\s*$", re.MULTILINE)


def load_queries(path: Path) -> dict[str, LiteralString]:
    text = path.read_text(encoding="utf-8")
    names = list(_HEADER.finditer(text))
    if not names:
        raise ValueError(f"{path}: no '-- name --' blocks")
    queries: dict[str, LiteralString] = {}
    for match, following in zip(names, [*names[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = text[match.end() : end].strip().rstrip(";").strip()
        if match.group(1) in queries:
            raise ValueError(f"{path}: query {match.group(1)!r} defined twice")
        # The text comes from files shipped with the package, never from input.
        queries[match.group(1)] = cast(LiteralString, body)
    return queries
