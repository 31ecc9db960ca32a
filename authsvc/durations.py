"""How long a link lives, said for people: one wording for the pages and the emails."""

from __future__ import annotations

from functools import lru_cache

from babel.lists import format_list
from babel.units import format_unit

from authsvc.locales import babel_locale

_MINUTE, _HOUR, _DAY = 60, 3600, 86400


@lru_cache(maxsize=1024)
def describe_duration(seconds: int, locale: str = "en") -> str:
    """'30 minutes', '24 hours', '1 hour and 30 minutes', '3 days', in `locale`.

    The largest unit that keeps the count readable (hours up to two days, so a
    day-long link reads "24 hours", as people say it), then at most one
    smaller unit. Babel's CLDR data gives each language its plural forms and
    its "and". Cached: a handful of lifetimes, each said once per locale.
    """
    units: tuple[tuple[int, str], ...]
    if seconds < _MINUTE:
        units = ((1, "second"),)
    elif seconds < _HOUR:
        units = ((_MINUTE, "minute"), (1, "second"))
    elif seconds < 2 * _DAY:
        units = ((_HOUR, "hour"), (_MINUTE, "minute"))
    else:
        units = ((_DAY, "day"), (_HOUR, "hour"))
    where = babel_locale(locale)
    parts = []
    for size, name in units:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(format_unit(count, f"duration-{name}", length="long", locale=where))
    if not parts:
        return format_unit(0, "duration-second", length="long", locale=where)
    return format_list(parts, locale=where)


def describe_wait(retry_after_seconds: int, locale: str = "en") -> str:
    """How long to wait before trying again, in whole minutes rounded up: waiting what a
    page says is always enough."""
    return describe_duration(max(1, -(-retry_after_seconds // 60)) * 60, locale)
