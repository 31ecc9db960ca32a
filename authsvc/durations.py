"""How long a link lives, said for people: one wording for the pages and the emails."""

from __future__ import annotations

_MINUTE, _HOUR, _DAY = 60, 3600, 86400


def describe_duration(seconds: int) -> str:
    """'30 minutes', '24 hours', '1 hour and 30 minutes', '3 days'.

    The largest unit that keeps the count readable (hours up to two days, so a
    day-long link reads "24 hours", as people say it), then at most one
    smaller unit.
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
    parts = []
    for size, name in units:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {name}{'s' if count != 1 else ''}")
    return " and ".join(parts) or "0 seconds"
