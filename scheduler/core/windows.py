"""Watermark and backfill window math.

Datetime windows sit on the calendar, `[low, high)`, as Airflow's data
intervals and Dagster's partitions do: a row stamped exactly `high` belongs
to the next window, so a window from March 1 00:00 to April 1 00:00 is
exactly March. The mark is the end of what was loaded (the next window's
`low`).

Integer windows are `(low, high]`: an integer mark is the largest value
loaded, and the next run reads what is greater than it.

`overlap` deliberately re-reads a little before the mark (late-arriving
rows); sinks are expected to upsert. `until` bounds a watermark: no window
reaches past it, and once the mark is there nothing more is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, Mapping, TypeVar, Union

from .errors import ConfigError
from .limits import LATEST, MAX_SECONDS

Mark = Union[datetime, int]
T = TypeVar("T", datetime, int)
# Integer marks are 64-bit source keys (BIGINT); marks and window ends are stored as text with room for no more.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class WatermarkType(str, Enum):
    DATETIME = "datetime"
    INTEGER = "integer"


def _bad(name: str, problem: str) -> ConfigError:
    return ConfigError(name, f"watermark.{name}: {problem}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class WatermarkConfig:
    type: WatermarkType = WatermarkType.DATETIME
    column: str = ""
    initial: Mark | None = None
    lag: timedelta = timedelta(0)
    # None means "zero of the right kind": timedelta(0) or 0, set below.
    overlap: timedelta | int | None = None
    max_window: timedelta | int | None = None
    # datetime marks stop before `until` (exclusive), integer marks at it (inclusive)
    until: Mark | None = None

    def __post_init__(self) -> None:
        try:
            kind = WatermarkType(self.type)
        except ValueError:
            raise _bad("type", "must be 'datetime' or 'integer'") from None
        object.__setattr__(self, "type", kind)
        if not isinstance(self.column, str):
            raise _bad("column", "must be a string")
        if kind is WatermarkType.DATETIME:
            self._check_datetime()
        else:
            self._check_integer()

    def _check_datetime(self) -> None:
        if self.initial is not None:
            if not isinstance(self.initial, datetime):
                raise _bad("initial", "must be a date and time")
            if self.initial.tzinfo is None or self.initial.utcoffset() is None:
                raise _bad("initial", "must include a time zone")
            object.__setattr__(self, "initial", _before_latest(self.initial, "initial"))
        if not isinstance(self.lag, timedelta) or self.lag < timedelta(0):
            raise _bad("lag", "must be zero or a positive number of seconds")
        overlap = timedelta(0) if self.overlap is None else self.overlap
        if not isinstance(overlap, timedelta) or overlap < timedelta(0):
            raise _bad("overlap", "must be zero or a positive number of seconds")
        object.__setattr__(self, "overlap", overlap)
        if self.max_window is not None and (
            not isinstance(self.max_window, timedelta) or self.max_window <= timedelta(0)
        ):
            raise _bad("max_window", "must be a positive number of seconds")
        for name in ("lag", "overlap", "max_window"):
            value = getattr(self, name)
            if value is not None and value > timedelta(seconds=MAX_SECONDS):
                raise _bad(name, f"must be at most {MAX_SECONDS} seconds (the largest allowed), "
                                 f"got {value.total_seconds():.0f}")
        if self.until is not None:
            if not isinstance(self.until, datetime):
                raise _bad("until", "must be a date and time")
            if self.until.tzinfo is None or self.until.utcoffset() is None:
                raise _bad("until", "must include a time zone")
            object.__setattr__(self, "until", _before_latest(self.until, "until"))
            if isinstance(self.initial, datetime) and self.until <= self.initial:
                raise _bad("until", "must be after initial")

    def _check_integer(self) -> None:
        if self.initial is not None and not _is_int(self.initial):
            raise _bad("initial", "must be a whole number")
        if self.initial is not None and not INT64_MIN <= self.initial <= INT64_MAX:
            raise _bad("initial", "is outside the 64-bit integer range")
        overlap = 0 if self.overlap is None else self.overlap
        if not _is_int(overlap) or overlap < 0:
            raise _bad("overlap", "must be zero or a positive whole number")
        if overlap > INT64_MAX:
            raise _bad("overlap", "is outside the 64-bit integer range")
        object.__setattr__(self, "overlap", overlap)
        if self.max_window is not None and (not _is_int(self.max_window) or self.max_window <= 0):
            raise _bad("max_window", "must be a positive whole number")
        if self.max_window is not None and self.max_window > INT64_MAX:
            raise _bad("max_window", "is outside the 64-bit integer range")
        if self.until is not None:
            if not _is_int(self.until):
                raise _bad("until", "must be a whole number")
            if not INT64_MIN <= self.until <= INT64_MAX:
                raise _bad("until", "is outside the 64-bit integer range")
            if self.initial is not None and self.until <= self.initial:
                raise _bad("until", "must be greater than initial")

    @property
    def is_datetime(self) -> bool:
        return self.type is WatermarkType.DATETIME

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: datetimes as ISO 8601, durations as seconds."""
        if self.is_datetime:
            assert isinstance(self.overlap, timedelta)
            return {
                "type": self.type.value,
                "column": self.column,
                "initial": self.initial.isoformat() if isinstance(self.initial, datetime) else None,
                "lag": self.lag.total_seconds(),
                "overlap": self.overlap.total_seconds(),
                "max_window": (
                    self.max_window.total_seconds() if isinstance(self.max_window, timedelta) else None
                ),
                "until": self.until.isoformat() if isinstance(self.until, datetime) else None,
            }
        return {
            "type": self.type.value,
            "column": self.column,
            "initial": self.initial,
            "overlap": self.overlap,
            "max_window": self.max_window,
            "until": self.until,
        }

    @classmethod
    def from_dict(cls, data: Any) -> "WatermarkConfig":
        """Parse user or stored input; every refusal names the field."""
        if not isinstance(data, Mapping):
            raise ConfigError("watermark", "watermark: must be an object")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise _bad(unknown[0], "unknown setting")
        raw_type = data.get("type", WatermarkType.DATETIME.value)
        try:
            kind = WatermarkType(raw_type)
        except ValueError:
            raise _bad("type", "must be 'datetime' or 'integer'") from None
        kwargs: dict[str, Any] = {"type": kind, "column": data.get("column", "")}
        if kind is WatermarkType.DATETIME:
            kwargs["initial"] = _parse_datetime(data.get("initial"))
            kwargs["until"] = _parse_datetime(data.get("until"), "until")
            for name in ("lag", "overlap"):
                if data.get(name) is not None:
                    kwargs[name] = _seconds(name, data[name], "zero or a positive number of seconds")
            if data.get("max_window") is not None:
                kwargs["max_window"] = _seconds("max_window", data["max_window"], "a positive number of seconds")
        else:
            for name in ("initial", "overlap", "max_window", "until"):
                value = data.get(name)
                if value is not None and not _is_int(value):
                    raise _bad(name, "must be a whole number")
                kwargs[name] = value
        return cls(**kwargs)


def _parse_datetime(value: Any, name: str = "initial") -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise _bad(name, f"{value!r} is not an ISO 8601 date and time") from None
    else:
        raise _bad(name, "must be an ISO 8601 date and time")
    # A bare "2024-01-01" from a form means UTC: stored marks are always UTC.
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed


def _before_latest(value: datetime, name: str) -> datetime:
    """`value` in UTC, refused unless it is before LATEST (so adding a duration to it cannot overflow)."""
    try:
        utc = value.astimezone(timezone.utc)
    except OverflowError:
        utc = None
    if utc is None or utc >= LATEST:
        raise _bad(name, f"must be before {LATEST.isoformat()} (the latest allowed), got {value.isoformat()}")
    return utc


def _seconds(name: str, value: Any, what: str) -> timedelta:
    if not _is_number(value) or value != value:  # value != value: NaN
        raise _bad(name, f"must be {what}")
    if value > MAX_SECONDS:
        raise _bad(name, f"must be at most {MAX_SECONDS} seconds (the largest allowed), got {value:g}")
    try:
        return timedelta(seconds=value)
    except OverflowError:
        raise _bad(name, f"must be {what}") from None


@dataclass(frozen=True)
class WatermarkState:
    value: Mark | None = None  # None: never loaded, start from the config's initial


@dataclass(frozen=True)
class Window:
    """Datetime bounds: [low, high). Integer bounds: (low, high]; high None: up to whatever exists."""

    low: Any
    high: Any

    @property
    def on_calendar(self) -> bool:
        """True for datetime windows, which include `low` and exclude `high`."""
        return isinstance(self.low, datetime) or isinstance(self.high, datetime)

    @property
    def operators(self) -> tuple[str, str]:
        """The SQL comparisons a source applies to `low` and `high`."""
        return (">=", "<") if self.on_calendar else (">", "<=")

    def contains(self, value: Any) -> bool:
        if self.on_calendar:
            return (self.low is None or self.low <= value) and (self.high is None or value < self.high)
        if self.low is not None and value <= self.low:
            return False
        return self.high is None or value <= self.high

    def __str__(self) -> str:
        def text(bound: Any) -> str:
            return bound.isoformat() if isinstance(bound, datetime) else ("" if bound is None else str(bound))

        if self.on_calendar:
            return f"[{text(self.low)}, {text(self.high)})"
        return f"({text(self.low)}, {text(self.high)}]"


def _mark(config: WatermarkConfig, state: WatermarkState) -> Mark:
    if state.value is not None:
        return state.value
    if config.initial is not None:
        return config.initial
    if config.is_datetime:
        raise _bad("initial", "is required until the first run has loaded something")
    # Integer keys (ids, offsets) conventionally start above 0.
    return 0


def compute_window(config: WatermarkConfig, state: WatermarkState, now: datetime) -> Window | None:
    """The next window to read, or None when nothing new can be read yet."""
    mark = _mark(config, state)
    if config.until is not None and mark >= config.until:
        return None  # the watermark reached its bound: nothing more to read
    if config.is_datetime:
        assert isinstance(mark, datetime)
        high = now - config.lag
        if config.max_window is not None:
            high = min(high, mark + config.max_window)
        if config.until is not None:
            high = min(high, config.until)
        if high <= mark:
            return None
        return Window(mark - config.overlap, high)
    assert isinstance(mark, int) and isinstance(config.overlap, int)
    low = mark - config.overlap
    high = mark + config.max_window if config.max_window is not None else None
    if config.until is not None:
        high = config.until if high is None else min(high, config.until)
    return Window(low, high)


def cut_by_max_window(config: WatermarkConfig, window: Window) -> bool:
    """Was this datetime window (as `compute_window` made it) cut short by max_window? Read back from a stored
    window (a retried attempt reads the window its first attempt computed), so its next slice is still queued."""
    if not config.is_datetime or config.max_window is None:
        return False
    return window.high - window.low >= config.max_window + config.overlap


def reached_until(config: WatermarkConfig, state: WatermarkState) -> bool:
    """True once the mark stands at (or past) the config's `until` bound."""
    if config.until is None:
        return False
    try:
        return _mark(config, state) >= config.until
    except ConfigError:
        return False


def compute_windows(
    config: WatermarkConfig, state: WatermarkState, now: datetime, limit: int | None = None
) -> list[Window]:
    """Consecutive windows covering the whole gap up to `now - lag`.

    Integer gaps have no known end, so they yield at most one window.
    """
    if not config.is_datetime:
        window = compute_window(config, state, now)
        return [window] if window is not None and limit != 0 else []
    out: list[Window] = []
    while limit is None or len(out) < limit:
        window = compute_window(config, state, now)
        if window is None:
            break
        out.append(window)
        state = WatermarkState(window.high)
    return out


def advance(
    config: WatermarkConfig, state: WatermarkState, window: Window, max_loaded: Any | None
) -> WatermarkState:
    """The state after a successful run of `window`; it never moves backwards."""
    # Compare with the effective mark: an overlap re-read below `initial`
    # on the first run must not drag the mark under it.
    current = state.value if state.value is not None else config.initial
    if current is None and not config.is_datetime:
        current = 0  # as in _mark
    if config.is_datetime:
        new = window.high
    else:
        # An integer window's high may be open; only what was loaded counts.
        new = max_loaded
    if new is None:
        return state
    if current is not None and new <= current:
        return state
    return WatermarkState(new)


def split_windows(start: T, end: T, size: Any, max_windows: int | None = None) -> list[tuple[T, T]]:
    """Contiguous windows covering [start, end) on the calendar; the last is clipped.

    Datetime windows are read as [low, high), so the union is exactly
    [start, end). Integer windows are read as (low, high], so integers
    greater than `start` up to `end` are covered.
    """
    try:
        if start >= end:
            raise ConfigError("from", "from must be before to")
    except TypeError:
        raise ConfigError("from", "from and to must be of the same kind") from None
    try:
        if size <= size * 0:
            raise ConfigError("window", "window: must be positive")
        whole, rest = divmod(end - start, size)
    except TypeError:
        raise ConfigError("window", "window: must match from/to (seconds for dates, a number for integers)") from None
    count = int(whole) + (1 if rest else 0)
    if max_windows is not None and count > max_windows:
        raise ConfigError("window", f"window: {count} windows exceed the limit of {max_windows}")
    out: list[tuple[T, T]] = []
    low = start
    append = out.append
    for i in range(1, count):
        high = start + size * i
        append((low, high))
        low = high
    append((low, end))
    return out
