"""Cron and interval fire times, with our own DST rules.

croniter is only ever asked about naive local wall-clock times; turning a
wall-clock time into an instant is done here with zoneinfo, because the DST
rules are a product decision (DESIGN.md, "Cron"):

* a local time that does not exist (spring-forward gap) fires once, at the
  first valid instant after the gap (02:30 Berlin -> 03:00 CEST);
* a repeated local time (fall-back) fires once, at its first occurrence,
  for crons that name their hours ("30 2 * * *" runs at 02:30 CEST only).
  Crons whose hour field is "*" are "every hour" jobs: they fire in both
  occurrences of the repeated hour, so an hourly or minutely cron neither
  skips nor duplicates an instant in UTC. This is classic Vixie cron's rule
  (fixed-time jobs run once, wildcard jobs follow real time).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterator
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .errors import ConfigError

UTC = timezone.utc

# croniter understands these too; we expand them so stored expressions always
# have explicit fields and the DST rule below can read the hour field.
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Wall-clock times earlier than `after` can still be instants later than it
# (the second pass through a repeated hour). No zone repeats more than this.
_REPEAT_MARGIN = timedelta(hours=3)


def validate_cron(expression: str) -> str:
    """The normalised expression (single spaces), or ConfigError(field='cron')."""
    if not isinstance(expression, str) or not expression.strip():
        raise ConfigError("cron", "cron: enter a cron expression such as '0 * * * *'")
    text = " ".join(expression.split())
    text = _ALIASES.get(text.lower(), text)
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise ConfigError(
            "cron",
            f"cron: expected 5 fields (minute hour day month weekday) or 6 with seconds last, got {len(fields)}",
        )
    try:
        # get_next also catches expressions that parse but never fire (Feb 31).
        croniter(text, datetime(2000, 1, 1)).get_next(datetime)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError("cron", f"cron: {exc}") from None
    return text


def validate_timezone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("timezone", "timezone: enter an IANA time zone such as 'Europe/Berlin'")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ConfigError("timezone", f"timezone: unknown time zone {name!r}") from None


def _require_aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value.astimezone(UTC)


def _is_real(naive: datetime, tz: ZoneInfo) -> bool:
    aware = naive.replace(tzinfo=tz, fold=0)
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == naive


def _end_of_gap(naive: datetime, tz: ZoneInfo) -> datetime:
    """The transition instant that swallowed `naive`, i.e. the first valid time after the gap."""
    # fold=1 reads the wall time with the offset after the jump, which lands
    # before the transition; fold=0 lands after it. Bisect on whole seconds.
    lo = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    hi = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    after_offset = hi.astimezone(tz).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + timedelta(seconds=int((hi - lo).total_seconds()) // 2)
        if mid.astimezone(tz).utcoffset() == after_offset:
            hi = mid
        else:
            lo = mid
    return hi


def _instants(naive: datetime, tz: ZoneInfo) -> tuple[datetime, datetime | None]:
    """(first instant for this wall time, second occurrence if it repeats)."""
    if not _is_real(naive, tz):
        return _end_of_gap(naive, tz), None
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    return first, (second if second != first else None)


def _iter_fires(expression: str, tz_name: str, after: datetime) -> Iterator[datetime]:
    """UTC fire instants strictly after `after`, ascending, without duplicates."""
    text = validate_cron(expression)
    tz = validate_timezone(tz_name)
    after = _require_aware(after, "after")
    every_hour = text.split(" ")[1] == "*"
    start = after.astimezone(tz).replace(tzinfo=None)
    offset = after.astimezone(tz).utcoffset()
    if any((after + d).astimezone(tz).utcoffset() != offset for d in (-_REPEAT_MARGIN, _REPEAT_MARGIN)):
        # a clock change is near: a repeated wall time at or before `after` may
        # have its second occurrence after it, so look back; elsewhere the
        # rewind would only cost croniter steps (10,800 for a per-second cron)
        start -= _REPEAT_MARGIN
    it = croniter(text, start)
    # Second occurrences are later than the first occurrences of the next few
    # wall times, so they wait here until their turn; they stay ascending.
    pending: list[datetime] = []
    last: datetime | None = None
    while True:
        naive = it.get_next(datetime)
        first, second = _instants(naive, tz)
        while pending and pending[0] <= first:
            instant = pending.pop(0)
            if instant > after and (last is None or instant > last):
                last = instant
                yield instant
        if first > after and (last is None or first > last):
            last = first
            yield first
        if second is not None and every_hour:
            pending.append(second)


def next_fires(expression: str, tz_name: str, after: datetime, count: int) -> list[datetime]:
    """The next `count` fire instants (aware UTC) strictly after `after`."""
    out: list[datetime] = []
    if count <= 0:
        return out
    for instant in _iter_fires(expression, tz_name, after):
        out.append(instant)
        if len(out) >= count:
            break
    return out


def fires_between(
    expression: str, tz_name: str, after: datetime, until: datetime, limit: int
) -> list[datetime]:
    """Fires in (after, until], at most `limit` (the oldest ones), for catch-up."""
    until = _require_aware(until, "until")
    out: list[datetime] = []
    if limit <= 0 or until <= after:
        return out
    for instant in _iter_fires(expression, tz_name, after):
        if instant > until:
            break
        out.append(instant)
        if len(out) >= limit:
            break
    return out


def describe_cron(expression: str, tz_name: str) -> str:
    """Plain words for the dashboard, e.g. 'Every hour, Europe/Berlin'."""
    try:
        text = validate_cron(expression)
    except ConfigError:
        return f"{expression}, {tz_name}"
    try:
        from cron_descriptor import get_description
    except ImportError:  # optional dependency
        return f"{text}, {tz_name}"
    fields = text.split(" ")
    if len(fields) == 6:
        # cron-descriptor reads a sixth field as seconds FIRST; croniter and
        # we keep it last.
        fields = [fields[5], *fields[:5]]
    try:
        words = get_description(" ".join(fields))
    except Exception:  # the describer is cosmetic: never fail a page on it
        return f"{text}, {tz_name}"
    return f"{words}, {tz_name}"


def next_interval_fires(
    anchor: datetime, every_seconds: float, after: datetime, count: int
) -> list[datetime]:
    """anchor + k * every (k >= 0) strictly after `after`, aware UTC."""
    if every_seconds <= 0:
        raise ConfigError("every_seconds", "every_seconds: must be a positive number of seconds")
    anchor = _require_aware(anchor, "anchor")
    after = _require_aware(after, "after")
    step = timedelta(seconds=every_seconds)
    # Integer arithmetic on timedeltas: no float drift after a million steps.
    k = 0 if after < anchor else (after - anchor) // step + 1
    return [anchor + step * (k + i) for i in range(max(count, 0))]
