"""How the CLI's commands parse what they are given: option callbacks, addresses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from authsvc.accounts.addresses import InvalidAddress, parse_address

T = TypeVar("T")


def parsed_by(parse: Callable[[str], T]) -> Callable[[click.Context, click.Parameter, Any], Any]:
    """A click callback applying `parse` to the value (to each value of a repeatable option).

    `parse`'s ValueError becomes click's usage error on that option, so the
    message names the option and the command exits 2 without a traceback.
    """

    def callback(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        try:
            if isinstance(param, click.Option) and param.multiple:
                return [parse(v) for v in value]
            return parse(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return callback


def parsed_address(value: str, param_hint: str = "ADDRESS") -> str:
    """`value` as the canonical address, or click's usage error naming `param_hint` (exit 2)."""
    try:
        return parse_address(value)
    except InvalidAddress as exc:
        raise click.BadParameter(str(exc), param_hint=param_hint) from None
