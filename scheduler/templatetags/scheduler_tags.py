"""Small display filters for the dashboard."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def seconds(value) -> str:
    """12.3 -> '12.3 s', 125 -> '2 min 5 s', 7300 -> '2 h 1 min'."""
    if value is None or value == "":
        return "—"
    value = float(value)
    if value < 60:
        return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"
    minutes, secs = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def pretty_json(value) -> str:
    if value in (None, "", {}):
        return "{}"
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def lower_status(value) -> str:
    return str(value or "none").lower()


# Polled parts are morphed (idiomorph, vendored under static/scheduler/vendor/),
# not replaced: focus, scroll and a half-typed reason survive a refresh.
MORPH_SWAP = "morph:{morphStyle:'outerHTML',ignoreActiveValue:true}"


@register.simple_tag
def morph_swap() -> str:
    return MORPH_SWAP
