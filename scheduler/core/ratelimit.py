"""Sliding-window start limit: at most N starts in any 60-second window."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Sequence

WINDOW = timedelta(seconds=60)


def next_allowed_start(recent_starts: Sequence[datetime], max_per_minute: int, now: datetime) -> datetime | None:
    """None if a run may start at `now`, else the earliest instant it may.

    A start at t counts against the window (t - 60 s, t]; starts exactly 60 s
    apart never share a window. 0 (or less) means unlimited.
    """
    if max_per_minute <= 0:
        return None
    # Starts "in the future" (clock skew between machines) still count.
    window = sorted(s for s in recent_starts if s > now - WINDOW)
    excess = len(window) - max_per_minute
    if excess < 0:
        return None
    # The oldest `excess + 1` starts must leave the window first.
    allowed = window[excess] + WINDOW
    return allowed if allowed > now else None
