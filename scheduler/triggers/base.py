"""The trigger plugin interface.

A plugin validates its own config (raising ConfigError naming the key),
describes itself in plain words and, when it is time based, computes fire
times. Third-party plugins subclass TriggerPlugin and are listed under the
entry point group `etl_scheduler.triggers`.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from scheduler.core import ConfigError

# Probing back from `now` starts with this span and doubles; see latest_fires.
_FIRST_SPAN = timedelta(minutes=1)


class TriggerPlugin:
    id: str = ""
    label: str = ""
    #: True when the dispatcher fires it from `Schedule.next_fire_at`.
    time_based: bool = False

    def validate(self, config: Any, *, timezone: str) -> dict:
        """Return the normalised config or raise ConfigError naming the key."""
        if config in (None, ""):
            return {}
        if not isinstance(config, dict):
            raise ConfigError("trigger_config", "must be a JSON object")
        return dict(config)

    def describe(self, config: dict, *, timezone: str) -> str:
        return self.label or self.id

    def next_fires(self, config: dict, *, timezone: str, after: datetime, count: int) -> list[datetime]:
        """The next `count` fire instants strictly after `after` (aware UTC); [] when not time based."""
        return []

    def latest_fires(
        self, config: dict, *, timezone: str, after: datetime, now: datetime, count: int
    ) -> list[datetime]:
        """At most the `count` most recent fires in (after, now], oldest first.

        After a long downtime the fires between `after` and `now` can be
        millions (a per-second cron down for a month), so this never walks them
        from `after`: it probes back from `now` with a doubling span until the
        span holds `count` fires or reaches `after`.
        """
        if count <= 0 or now <= after:
            return []
        span = _FIRST_SPAN
        while True:
            low = max(after, now - span)
            fires = self._fires_between(config, timezone=timezone, after=low, until=now, keep=count)
            if len(fires) >= count or low == after:
                return fires
            span *= 2

    def _fires_between(
        self, config: dict, *, timezone: str, after: datetime, until: datetime, keep: int
    ) -> list[datetime]:
        kept: list[datetime] = []
        cursor = after
        # a due schedule usually has one fire in the window: start small and
        # double, since every fire computed costs a croniter step
        size = keep + 1
        while True:
            batch = self.next_fires(config, timezone=timezone, after=cursor, count=min(size, 256))
            inside = [f for f in batch if f <= until]
            kept = (kept + inside)[-keep:]
            if len(inside) < len(batch) or not batch:
                return kept
            cursor = batch[-1]
            size *= 2


def require_keys(config: dict, allowed: set[str], required: set[str] = frozenset()) -> None:
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ConfigError(
            f"trigger_config.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(allowed)) or 'none'})"
        )
    for key in sorted(required):
        if key not in config or config[key] in (None, ""):
            raise ConfigError(f"trigger_config.{key}", "is required")
