"""The trigger plugin interface.

A plugin validates its own config (raising ConfigError naming the key),
describes itself in plain words and, when it is time based, computes fire
times. Third-party plugins subclass TriggerPlugin and are listed under the
entry point group `etl_scheduler.triggers`.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from scheduler.core import ConfigError


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
        return []

    def due_fires(
        self, config: dict, *, timezone: str, after: datetime, now: datetime, catchup: bool, max_catchup: int
    ) -> list[datetime]:
        """Fires in (after, now] to turn into runs: all of them (bounded) or the latest one."""
        fires: list[datetime] = []
        cursor = after
        limit = max(1, max_catchup) if catchup else 10_000
        while True:
            batch = self.next_fires(config, timezone=timezone, after=cursor, count=min(limit, 500))
            batch = [f for f in batch if f <= now]
            fires.extend(batch)
            if len(batch) < min(limit, 500) or not batch:
                break
            cursor = batch[-1]
            if catchup and len(fires) >= limit:
                break
            if not catchup and len(fires) > limit:
                fires = fires[-1:]
        if not fires:
            return []
        if catchup:
            # the most recent `max_catchup` fires: old ones beyond the bound are dropped on purpose
            return fires[-limit:] if len(fires) > limit else fires
        return fires[-1:]


def require_keys(config: dict, allowed: set[str], required: set[str] = frozenset()) -> None:
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ConfigError(f"trigger_config.{unknown[0]}", f"unknown key (allowed: {', '.join(sorted(allowed)) or 'none'})")
    for key in sorted(required):
        if key not in config or config[key] in (None, ""):
            raise ConfigError(f"trigger_config.{key}", "is required")
