"""Per-schedule circuit breaker as pure state transitions.

The app stores BreakerState on the schedule and swaps it with a
compare-and-set; these functions only say what the next state is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Mapping

from .errors import ConfigError


class BreakerStatus(str, Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


REASON_OPEN = "circuit open"
REASON_TRIAL_RUNNING = "circuit half-open: test run in progress"
REASON_TRIAL = "circuit half-open: test run"


@dataclass(frozen=True)
class BreakerSettings:
    threshold: int = 5
    cooldown: timedelta = timedelta(minutes=5)
    max_cooldown: timedelta = timedelta(hours=1)

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or self.threshold < 1:
            raise ConfigError("threshold", "threshold: must be a whole number of at least 1")
        if not isinstance(self.cooldown, timedelta) or self.cooldown <= timedelta(0):
            raise ConfigError("cooldown", "cooldown: must be a positive duration")
        if not isinstance(self.max_cooldown, timedelta) or self.max_cooldown < self.cooldown:
            raise ConfigError("max_cooldown", "max_cooldown: must be at least the cooldown")


@dataclass(frozen=True)
class BreakerState:
    status: BreakerStatus = BreakerStatus.CLOSED
    failures: int = 0  # consecutive
    opened_at: datetime | None = None
    cooldown: timedelta | None = None  # the current one; grows while trials fail
    trial_in_flight: bool = False

    @property
    def reopens_at(self) -> datetime | None:
        """When an open breaker will admit its test run."""
        if self.status is not BreakerStatus.OPEN or self.opened_at is None or self.cooldown is None:
            return None
        return self.opened_at + self.cooldown

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "failures": self.failures,
            "opened_at": self.opened_at.isoformat() if self.opened_at else None,
            "cooldown": self.cooldown.total_seconds() if self.cooldown is not None else None,
            "trial_in_flight": self.trial_in_flight,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BreakerState":
        opened = data.get("opened_at")
        cooldown = data.get("cooldown")
        return cls(
            status=BreakerStatus(data.get("status", BreakerStatus.CLOSED.value)),
            failures=int(data.get("failures", 0)),
            opened_at=datetime.fromisoformat(opened) if opened else None,
            cooldown=timedelta(seconds=cooldown) if cooldown is not None else None,
            trial_in_flight=bool(data.get("trial_in_flight", False)),
        )


def reset(state: BreakerState | None = None) -> BreakerState:
    """Closed with a clean count (what a person's reset does)."""
    return BreakerState()


def record_success(state: BreakerState, settings: BreakerSettings) -> BreakerState:
    return BreakerState()


def record_failure(state: BreakerState, settings: BreakerSettings, now: datetime) -> BreakerState:
    failures = state.failures + 1
    if state.status is BreakerStatus.HALF_OPEN:
        # The test run failed: back off harder so a dead source is not
        # hammered every few minutes all night.
        current = state.cooldown or settings.cooldown
        return BreakerState(
            status=BreakerStatus.OPEN,
            failures=failures,
            opened_at=now,
            cooldown=min(current * 2, settings.max_cooldown),
        )
    if state.status is BreakerStatus.OPEN:
        # A run admitted before the breaker opened finished late; count it
        # but do not restart the cooldown.
        return replace(state, failures=failures)
    if failures >= settings.threshold:
        return BreakerState(
            status=BreakerStatus.OPEN,
            failures=failures,
            opened_at=now,
            cooldown=min(settings.cooldown, settings.max_cooldown),
        )
    return replace(state, failures=failures)


def cooldown_over(state: BreakerState, now: datetime) -> bool:
    """True when an open breaker may admit its test run."""
    reopens = state.reopens_at
    return reopens is not None and now >= reopens


def admit(state: BreakerState, settings: BreakerSettings, now: datetime) -> tuple[bool, BreakerState, str]:
    """(may run, next state, reason). Admitting the trial changes the state."""
    if state.status is BreakerStatus.CLOSED:
        return True, state, ""
    if state.status is BreakerStatus.OPEN:
        if not cooldown_over(state, now):
            return False, state, REASON_OPEN
        return True, replace(state, status=BreakerStatus.HALF_OPEN, trial_in_flight=True), REASON_TRIAL
    if state.trial_in_flight:
        return False, state, REASON_TRIAL_RUNNING
    # Half-open without a trial: the previous trial was cancelled or lost.
    return True, replace(state, trial_in_flight=True), REASON_TRIAL
