"""Value conversions shared by the built-in sources and sinks.

Datetimes stored as text (SQLite, CSV, JSON) use one canonical form,
`2024-05-01T12:00:00.000000+00:00`: UTC, fixed width, so that comparing the
text compares the instants. SqlSource relies on that to push window filters
into SQLite, where an index on the column can serve them.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from scheduler.core import ConfigError

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def to_utc(value: datetime) -> datetime:
    """Aware UTC; a naive datetime is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def iso_utc(value: datetime) -> str:
    """The canonical text form of an instant (see the module docstring)."""
    return to_utc(value).isoformat(timespec="microseconds")


def parse_datetime(text: str) -> datetime:
    """ISO-8601 text to an aware datetime; naive text is taken as UTC."""
    return to_utc(datetime.fromisoformat(text.strip()))


def coerce_like(value: Any, like: Any) -> Any:
    """Convert `value` (often text from a file) to the type of `like`.

    Raises ValueError (bad text) or TypeError (wrong kind of value) when it
    cannot be converted, so callers can report the offending record.
    """
    if isinstance(like, bool) or like is None:
        return value
    if isinstance(like, datetime):
        if isinstance(value, datetime):
            return to_utc(value)
        if isinstance(value, str):
            return parse_datetime(value)
        raise TypeError(f"expected an ISO-8601 datetime, got {value!r}")
    if isinstance(like, int):
        if isinstance(value, bool):
            raise TypeError(f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            return int(value.strip())
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def sql_text_value(value: Any) -> Any:
    """A Python value as SQLite (and CSV) should store it."""
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def check_identifier(name: Any, field: str) -> str:
    """Table and column names are interpolated into SQL, so only plain names pass."""
    if not isinstance(name, str) or not IDENTIFIER.match(name):
        raise ConfigError(field, f"{name!r} is not a valid identifier (letters, digits, _ and .)")
    return name


def check_identifiers(names: Any, field: str) -> list[str]:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)) or not names:
        raise ConfigError(field, "must be a name or a non-empty list of names")
    checked = [check_identifier(n, field) for n in names]
    if len(set(checked)) != len(checked):
        raise ConfigError(field, "names must not repeat")
    return checked


def window_bounds(window: Any, field: str = "window") -> tuple[Any, Any]:
    """(low, high) of a Window-like object; either may be None (open end)."""
    if window is None:
        return None, None
    try:
        low, high = window.low, window.high
    except AttributeError:
        raise ConfigError(field, "must be a Window with low and high") from None
    for bound in (low, high):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, datetime))):
            raise ConfigError(field, f"bounds must be datetimes or integers, got {bound!r}")
    return low, high


def sql_type(value: Any, *, postgres: bool) -> str:
    """The column type SqlSink creates (create=True) for a column whose first value is `value`."""
    if isinstance(value, (bool, int)):
        return "BIGINT" if postgres else "INTEGER"
    if isinstance(value, float):
        return "DOUBLE PRECISION" if postgres else "REAL"
    if isinstance(value, Decimal):
        return "NUMERIC" if postgres else "REAL"
    if postgres and isinstance(value, datetime):
        return "TIMESTAMPTZ"
    if postgres and isinstance(value, date):
        return "DATE"
    return "TEXT"
