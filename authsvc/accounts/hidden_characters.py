"""Characters that hide, reorder or split text a person reads: one rule for addresses and links."""

from __future__ import annotations

import re
import unicodedata

# Control, format (bidi overrides, zero-width), surrogate, separator and space.
_HIDING_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"})
# Characters that render as nothing but sit outside those categories:
# combining grapheme joiner, variation selectors, Hangul and braille blanks,
# Mongolian selectors.
_BLANK_LOOKING = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef]"
)


def has_blank_looking(text: str) -> bool:
    """Whether `text` holds a character that renders as nothing yet is not a format character."""
    return _BLANK_LOOKING.search(text) is not None


def hides_text(text: str) -> bool:
    """Whether `text` holds any character that could hide, reorder or split what is shown."""
    return has_blank_looking(text) or any(
        unicodedata.category(c) in _HIDING_CATEGORIES for c in text
    )
