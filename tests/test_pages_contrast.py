"""The pages' stylesheet: form controls stand out from what surrounds them (WCAG 2.2, 1.4.11).

The colours are read from pages.css itself (custom properties resolved), so a
palette change that makes an input's edge hard to see fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = Path(__file__).resolve().parents[1] / "authsvc" / "web" / "pages" / "static" / "pages.css"
NON_TEXT_MINIMUM = 3.0  # WCAG 1.4.11 non-text contrast


def _rules(css: str) -> dict[str, str]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    # The resting palette: rules that apply only at some widths are left out.
    css = re.sub(r"@media[^{]*\{(?:[^{}]*\{[^{}]*\})*[^{}]*\}", "", css)
    return {sel.strip(): body for sel, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)}


def _declarations(body: str) -> dict[str, str]:
    pairs = (part.split(":", 1) for part in body.split(";") if ":" in part)
    return {name.strip(): value.strip() for name, value in pairs}


def _colour(value: str, variables: dict[str, str]) -> str:
    """The first #rrggbb in `value`, through var(--x) references."""
    value = re.sub(r"var\((--[\w-]+)\)", lambda m: variables[m.group(1)], value)
    found = re.search(r"#[0-9a-fA-F]{6}\b", value)
    assert found, f"no #rrggbb colour in {value!r}"
    return found.group(0)


def _luminance(colour: str) -> float:
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    light, dark = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_the_contrast_formula_matches_wcag():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#b6bdca", "#ffffff") == pytest.approx(1.89, abs=0.01)  # the old border


@pytest.mark.parametrize(
    ("selector", "state"),
    [(".field input", "at rest"), (".has-error input", "with an error"),
     (".field input:focus", "focused")],
)
def test_input_borders_reach_3_to_1_against_the_input_and_the_card(selector, state):
    rules = _rules(CSS.read_text(encoding="utf-8"))
    variables = {k: v for k, v in _declarations(rules[":root"]).items() if k.startswith("--")}
    border = _colour(_declarations(rules[selector]).get("border-color")
                     or _declarations(rules[selector])["border"], variables)
    inside = _colour(_declarations(rules[".field input"])["background"], variables)
    card = _colour(_declarations(rules[".card"])["background"], variables)
    for name, ground in (("the input", inside), ("the card", card)):
        ratio = contrast(border, ground)
        assert ratio >= NON_TEXT_MINIMUM, f"{state}: {border} on {name} {ground} is {ratio:.2f}:1"
