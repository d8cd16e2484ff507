"""Small display filters for the dashboard."""

from __future__ import annotations

import json
from datetime import datetime
from datetime import timezone as dt_timezone

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil

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


@register.simple_tag(takes_context=True)
def when(context, value, relative: bool = True) -> str:
    """A moment in the viewer's zone, labelled with that zone, UTC on hover, and how long ago (or until).

    Never `|date` followed by a literal "UTC": that labels local time as UTC whenever TIME_ZONE is not UTC.
    """
    if not value:
        return "—"
    local = timezone.localtime(value)
    utc = value.astimezone(dt_timezone.utc)
    stamp = local.strftime("%Y-%m-%d %H:%M:%S")
    zone = local.tzname() or ""
    html = format_html(
        '<time datetime="{}" title="{} UTC">{} {}</time>',
        utc.strftime("%Y-%m-%dT%H:%M:%SZ"), utc.strftime("%Y-%m-%d %H:%M:%S"), stamp, zone,
    )
    if relative:
        html += format_html(' <span class="muted small rel">{}</span>', ago(value, _now(context)))
    return html


def _now(context) -> datetime | None:
    now = context.get("now")
    return now if isinstance(now, datetime) else None


def ago(value: datetime, now: datetime | None = None) -> str:
    """'5 minutes ago', 'in 2 hours', 'just now': the largest unit only."""
    now = now or timezone.now()
    seconds = (now - value).total_seconds()
    if abs(seconds) < 60:
        return "just now"
    if seconds > 0:
        return f"{timesince(value, now, depth=1)} ago"
    return f"in {timeuntil(value, now, depth=1)}"


@register.filter(name="ago")
def ago_filter(value) -> str:
    return ago(value) if value else "—"
