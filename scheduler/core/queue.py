"""Which queued runs the dispatcher may start now, and why the rest wait."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Hashable, Mapping, Sequence


@dataclass
class QueuedItem:
    id: Any
    priority: int
    queued_at: datetime
    workload_class: str
    schedule_id: Any = None


def queue_order(queued: Sequence[QueuedItem]) -> list[QueuedItem]:
    """Higher priority first, then FIFO, then id so ties are deterministic."""
    return sorted(queued, key=lambda q: (-q.priority, q.queued_at, q.id))


def plan_admissions(
    queued: Sequence[QueuedItem],
    running_per_class: Mapping[str, int],
    limits: Mapping[str, int],
    blocked_schedules: Mapping[Hashable, str] | None = None,
    max_admit: int | None = None,
) -> tuple[list[Any], dict[Any, str]]:
    """(ids to start in order, reason for every id that waits).

    A class missing from `limits` has no limit; a limit of 0 pauses a class.
    A full class does not hold back other classes: FIFO applies within a
    priority across classes, but a lower-priority run of a free class starts
    rather than idling behind a full one. `blocked_schedules` maps a
    schedule id to why its runs may not start (e.g. "rate limited until ...").
    """
    blocked = blocked_schedules or {}
    running = dict(running_per_class)
    admitted: list[Any] = []
    reasons: dict[Any, str] = {}
    waiting = 0
    for item in queue_order(queued):
        cls = item.workload_class
        limit = limits.get(cls)
        used = running.get(cls, 0)
        if item.schedule_id is not None and item.schedule_id in blocked:
            reason = blocked[item.schedule_id]
        elif limit is not None and used >= limit:
            reason = f"class '{cls}' full ({used}/{limit})"
        elif max_admit is not None and len(admitted) >= max_admit:
            reason = ""
        else:
            admitted.append(item.id)
            running[cls] = used + 1
            continue
        waiting += 1
        reasons[item.id] = reason or f"position {waiting} in queue"
    return admitted, reasons
