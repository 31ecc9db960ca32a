"""Databases as an earlier release left them: migrations applied up to a version."""

from __future__ import annotations

from authsvc.db.connections import connect
from authsvc.db.migrate import available_migrations


def migrate_before(url: str, version: str) -> None:
    """Apply (and record) every migration older than `version`, as that release's runner did."""
    with connect(url) as conn:  # through a pooler too: nothing prepared
        for migration in available_migrations():
            if migration.version >= version:
                break
            with conn.transaction():
                conn.execute(migration.path.read_text(encoding="utf-8"))  # type: ignore[arg-type]
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                             (migration.version, migration.name))
