"""Freshness objectives: how old a schedule's data is, and whether that breaks its objective. Pure.

Two measures:

* ``last_success``: the age of the last successful live run (what a
  consumer of the table sees: "refreshed 3 h ago");
* ``watermark``: how far a datetime watermark lags behind now (what the
  data itself covers: "loaded up to 05:00").

Before the first success (or the first mark), the age counts from
`since` (when the schedule was created, or the mark's initial value), so a
new schedule that never runs does breach, after one objective's time.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

LAST_SUCCESS, WATERMARK = "last_success", "watermark"


@dataclass(frozen=True)
class Freshness:
    age: timedelta
    objective: timedelta
    measured_from: datetime

    @property
    def breached(self) -> bool:
        return self.age > self.objective

    def describe(self, measure: str) -> str:
        what = "last success" if measure == LAST_SUCCESS else "watermark"
        return (f"{what} at {self.measured_from:%Y-%m-%d %H:%M:%S} UTC is {_span(self.age)} old "
                f"(objective {_span(self.objective)})")


def freshness(measure: str, *, now: datetime, objective: timedelta, last_success: datetime | None,
              mark: datetime | None, since: datetime) -> Freshness:
    """The data's age under `measure`; `since` stands in when there is no success or mark yet."""
    if measure not in (LAST_SUCCESS, WATERMARK):
        raise ValueError(f"unknown freshness measure {measure!r}")
    point = (last_success if measure == LAST_SUCCESS else mark) or since
    return Freshness(age=max(now - point, timedelta(0)), objective=objective, measured_from=point)


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 86400 == 0 and seconds >= 86400:
        return f"{seconds // 86400} d"
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min" if seconds % 3600 else f"{seconds // 3600} h"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s" if seconds % 60 else f"{seconds // 60} min"
    return f"{seconds} s"
