"""The `authsvc` command: the composition root that wires every part together."""

from __future__ import annotations

import click
from dotenv import load_dotenv

from authsvc.cli import apps, db, serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """authsvc: signup verification and password-reset emails."""
    load_dotenv(".env", override=False)


main.add_command(db.db)
main.add_command(apps.apps)
main.add_command(serve.serve)


def _register_optional() -> None:
    # Parts built in their own modules register here; each is optional so the
    # command still works while a part is absent from a checkout.
    import importlib

    for module, name in (
        ("worker.cli", "worker"),
        ("worker.cli", "outbox"),
        ("authsvc.cli.dev", "dev"),
        ("authsvc.cli.inbox", "inbox"),
    ):
        try:
            command = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        main.add_command(command)


_register_optional()
