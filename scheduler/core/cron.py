"""Cron and interval fire times, as Debian cron runs them.

croniter is only ever asked about naive local wall-clock times; turning a
wall-clock time into an instant is done here with zoneinfo, following Debian
cron's rule (DESIGN.md, "Cron"; healthchecks' cronsim implements the same
rule and is our test oracle, tests/core/test_cron_oracle.py):

* an expression whose minute or hour field starts with "*" (and every
  6-field expression) follows real time: it fires at each instant whose
  local wall time matches. A wall time inside a spring-forward gap never
  happens, so it does not fire ("45 * * * *" skips 02:45 in Berlin on that
  day); a repeated hour happens twice, so it fires in both passes;
* a fixed-time expression (minute and hour fields name their values) fires
  once at the first valid minute after a skipped local time (02:30 Berlin ->
  03:00 CEST), and once, at the first occurrence, in a repeated hour;
* day of month and day of week: when either field starts with "*" both must
  match, otherwise either may (Vixie/Debian cron, not croniter's default).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache
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
    return _validated(expression)


@lru_cache(maxsize=4096)
def _validated(expression: str) -> str:
    # every fire computation validates its expression first: parse each one once per process
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


def follows_real_time(expression: str) -> bool:
    """True for Debian cron's "wildcard" jobs: minute or hour starts with '*', or 6 fields."""
    fields = expression.split(" ")
    return len(fields) == 6 or fields[0].startswith("*") or fields[1].startswith("*")


def _croniter(text: str, start: datetime) -> croniter:
    fields = text.split(" ")
    # Vixie cron ANDs day-of-month and day-of-week when either starts with
    # '*' ("*/2" included); croniter would OR a "*/2" with a weekday.
    day_or = not (fields[2].startswith("*") or fields[4].startswith("*"))
    return croniter(text, start, day_or=day_or)


def _first_real_minute(naive: datetime, tz: ZoneInfo) -> datetime:
    """A wall time in a spring-forward gap moves to the first valid minute after it (as cronsim does)."""
    while not _is_real(naive, tz):
        naive += timedelta(minutes=1)
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC)


def _iter_fixed(text: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    # Every wall time maps to one instant (gap -> first valid minute, repeated
    # -> first occurrence) and that map is monotonic, so the instants come out
    # ascending; several gap times collapse onto the same minute, hence `last`.
    it = _croniter(text, after.astimezone(tz).replace(tzinfo=None))
    last: datetime | None = None
    while True:
        instant = _first_real_minute(it.get_next(datetime), tz)
        if instant > after and (last is None or instant > last):
            last = instant
            yield instant


def _iter_real_time(text: str, tz: ZoneInfo, after: datetime) -> Iterator[datetime]:
    start = after.astimezone(tz).replace(tzinfo=None)
    offset = after.astimezone(tz).utcoffset()
    if any((after + d).astimezone(tz).utcoffset() != offset for d in (-_REPEAT_MARGIN, _REPEAT_MARGIN)):
        # a clock change is near: a repeated wall time at or before `after` may
        # have its second occurrence after it, so look back; elsewhere the
        # rewind would only cost croniter steps (10,800 for a per-second cron)
        start -= _REPEAT_MARGIN
    it = _croniter(text, start)
    # Second occurrences are later than the first occurrences of the next few
    # wall times, so they wait here until their turn; they stay ascending.
    pending: list[datetime] = []
    last: datetime | None = None
    while True:
        naive = it.get_next(datetime)
        if not _is_real(naive, tz):
            continue  # this wall time never happens today
        first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
        second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
        while pending and pending[0] <= first:
            instant = pending.pop(0)
            if instant > after and (last is None or instant > last):
                last = instant
                yield instant
        if first > after and (last is None or first > last):
            last = first
            yield first
        if second != first:
            pending.append(second)


def _iter_fires(expression: str, tz_name: str, after: datetime) -> Iterator[datetime]:
    """UTC fire instants strictly after `after`, ascending, without duplicates."""
    text = validate_cron(expression)
    tz = validate_timezone(tz_name)
    after = _require_aware(after, "after")
    if follows_real_time(text):
        return _iter_real_time(text, tz, after)
    return _iter_fixed(text, tz, after)


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
