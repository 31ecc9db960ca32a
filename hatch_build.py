"""The wheel's compiled catalogs: every translations/**/*.po compiled into it at build time.

.mo files are build output (never committed), so a wheel built from a fresh
clone, without `make`, still carries them: each is compiled here from its
.po and placed beside it under authsvc/_shipped/translations.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CompiledCatalogs(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return  # an editable install reads translations/ in the checkout (make compiles)
        source = Path(self.root) / "translations"
        out = Path(tempfile.mkdtemp(prefix="authsvc-mo-"))
        for po in sorted(source.glob("*/LC_MESSAGES/*.po")):
            relative = po.relative_to(source).with_suffix(".mo")
            with po.open("rb") as f:
                catalog = read_po(f)
            target = out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as f:
                write_mo(f, catalog)
            build_data["force_include"][str(target)] = (
                f"authsvc/_shipped/translations/{relative.as_posix()}")
