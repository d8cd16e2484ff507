"""The one way a person reads a time (issue 37 point 11): in the viewer's zone (the zone the display-zone
middleware activated), to the second, with the zone named: `2026-12-05 03:10:49 CET`.

Pages, the admin (etlsite/formats), stored window bounds (ISO text) and audit values all go through here;
machine-readable places (`<time datetime>`, CSV, the API) keep UTC ISO.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

from django.utils import timezone

MOMENT = "%Y-%m-%d %H:%M:%S"  # strftime; the admin's DATETIME_FORMAT says the same in Django's letters


def parse_moment(value) -> datetime | None:
    """An aware datetime from a datetime or ISO text (naive means UTC, as stored marks are); None otherwise."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt_timezone.utc)
    if not isinstance(value, str) or len(value) < 10 or not value[:4].isdigit() or value[4:5] != "-":
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt_timezone.utc)


def moment_text(value, zone=None) -> str:
    """A moment as a person reads it: in `zone` (default the viewer's), to the second, the zone named."""
    local = timezone.localtime(value, zone)
    return f"{local.strftime(MOMENT)} {local.tzname() or ''}".strip()


def utc_iso(value) -> str:
    """The moment for machines (a `<time datetime>`, a URL): UTC, to the second, with a Z."""
    return value.astimezone(dt_timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def bound_text(value: str, empty: str) -> str:
    """A stored window bound: a datetime in the viewer's zone, anything else (an integer mark) as it is."""
    if not value:
        return empty
    moment = parse_moment(value)
    return value if moment is None else moment_text(moment)


def interval_text(low: str, high: str) -> str:
    """Stored bounds as read: [low, high) for datetimes (in the viewer's zone), (low, high] for integers."""
    if not (low or high):
        return ""
    if "T" in low or "T" in high:
        return f"[{bound_text(low, 'start')}, {bound_text(high, 'now')})"
    return f"({low or 'start'}, {high or 'latest'}]"


_UNITS = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def span_words(value) -> str:
    """A window size in seconds as words: 86400 -> '1 day', 900 -> '15 minutes', 5400 -> '90 minutes'; a
    value that is not a number of seconds (an integer mark's count) is returned as it is."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not seconds.is_integer() or seconds <= 0:
        return f"{seconds:g} seconds"
    seconds = int(seconds)
    unit, name = next((u, n) for u, n in _UNITS if seconds % u == 0)
    count = seconds // unit
    return f"{count:,} {name}{'s' if count != 1 else ''}"
