"""Readable everywhere: every text colour in app.css meets WCAG AA (4.5:1) on the background it is drawn on.

The pairs are read from the stylesheet itself, so a new status pill or label is checked the day it is added.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CSS = Path(__file__).resolve().parents[2] / "static" / "scheduler" / "app.css"
AA = 4.5
PAGE_BACKGROUNDS = {"page": "var(--bg)", "card": "var(--card)"}
# areas with a background of their own: text colours inside them are checked against it
AREAS = {"header.top": "#1d2330", "ol.log": "#0f1420"}
# rules that colour shapes, not text
NOT_TEXT = re.compile(r"(^|\s|,)(svg|progress|\.w\b|\.w-|\.windows|\.legend|\.strip|\.tick|\.log-box|\*)")


def _rules(css: str) -> list[tuple[str, dict[str, str]]]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    rules = []
    for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        selector = selector.strip()
        if selector.startswith("@"):
            continue
        decls = {}
        for part in body.split(";"):
            if ":" in part:
                key, value = part.split(":", 1)
                decls[key.strip()] = value.strip()
        rules.append((selector, decls))
    return rules


def _variables(rules) -> dict[str, str]:
    return {k: v for sel, decls in rules if sel == ":root" for k, v in decls.items() if k.startswith("--")}


def _hex(value: str, variables: dict[str, str]) -> str | None:
    value = value.replace("!important", "").strip()
    match = re.fullmatch(r"var\((--[\w-]+)\)", value)
    if match:
        value = variables[match.group(1)]
    match = re.search(r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b", value)
    if not match:
        return None
    digits = match.group(1)
    return "#" + ("".join(c * 2 for c in digits) if len(digits) == 3 else digits).lower()


def _luminance(color: str) -> float:
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(fg: str, bg: str) -> float:
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _pairs() -> list[tuple[str, str, str, str]]:
    """(selector, where, text colour, background) for every text colour the stylesheet sets."""
    rules = _rules(CSS.read_text())
    variables = _variables(rules)
    fg_default = _hex("var(--fg)", variables)
    button_fg = next(_hex(d["color"], variables) for s, d in rules if s.startswith("button, .button"))
    pill_bg = next(_hex(d["background"], variables) for s, d in rules if s == ".status")
    pairs = []
    for selector, decls in rules:
        for one in (s.strip() for s in selector.split(",")):
            if one == ":root" or NOT_TEXT.search(one) or one.endswith(":hover"):
                continue
            color = _hex(decls.get("color", ""), variables) if "color" in decls else None
            background = _hex(decls.get("background", decls.get("background-color", "")), variables)
            area = next((bg for prefix, bg in AREAS.items() if one.startswith(prefix)), None)
            if color is None and background is None:
                continue
            if re.search(r"\.s-[\w-]+$", one):  # a status pill: on its own background or the pill's
                pairs.append((one, "pill", color or fg_default, background or pill_bg))
            elif color and background:
                pairs.append((one, "own background", color, background))
            elif color and area:
                pairs.append((one, "its area", color, area))
            elif color:
                for where, bg in PAGE_BACKGROUNDS.items():
                    pairs.append((one, where, color, _hex(bg, variables)))
            elif background and not area:
                is_button = re.match(r"(a\.)?\.?button\b", one) is not None
                pairs.append((one, "default text", button_fg if is_button else fg_default, background))
    return pairs


def test_the_stylesheet_has_pairs_to_check():
    selectors = {p[0] for p in _pairs()}
    assert {".s-blocked", ".s-succeeded", ".muted", ".error", "th"} <= selectors


@pytest.mark.parametrize("selector, where, fg, bg", _pairs(), ids=lambda v: str(v))
def test_text_meets_wcag_aa_contrast(selector, where, fg, bg):
    ratio = contrast(fg, bg)
    assert ratio >= AA, f"{selector} ({where}): {fg} on {bg} is {ratio:.2f}:1, needs {AA}:1"


def test_the_contrast_formula_matches_wcag_reference_values():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48
    assert contrast("#c98a0b", "#fff0d6") < AA  # BLOCKED as it was: 2.6:1
