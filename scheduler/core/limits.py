"""The largest values a schedule may hold, so that nothing it computes overflows.

Every duration (a retry delay, a watermark's lag, overlap or max window, a
backfill window) is at most `MAX_SECONDS` (about 68 years, the largest 32-bit
whole number of seconds), and every date and time a person or a file gives (a
watermark's initial, until or set value, a backfill's bounds) is before
`LATEST`. The sum of the two still fits in Python's calendar (year 9999), so
"now plus an interval", "mark plus max window" and "backfill end plus a
window" never overflow.
"""
from __future__ import annotations

from datetime import datetime, timezone

MAX_SECONDS = 2**31 - 1
LATEST = datetime(9900, 1, 1, tzinfo=timezone.utc)


def latest_text() -> str:
    return LATEST.isoformat()
