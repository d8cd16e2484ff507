"""A backfill's window grid, bounded whatever the number of windows."""

from __future__ import annotations

from datetime import timedelta
from statistics import median

from django.db.models import Count, F

from scheduler.models import BackfillStatus, BackfillWindow, Run, RunStatus, WindowStatus
from scheduler.timefmt import parse_moment


# the worst status of a block decides its colour: a failure must not hide among successes
BLOCK_STATUS_ORDER = ["FAILED", "RUNNING", "QUEUED", "PENDING", "CANCELLED", "SUCCEEDED"]


def backfill_counts(backfill) -> dict[str, int]:
    """Windows per status, counted by the database (one query, no window loaded)."""

    counts = {status: 0 for status in WindowStatus.values}
    for row in BackfillWindow.objects.filter(backfill=backfill).values("status").annotate(n=Count("id")).order_by():
        counts[row["status"]] = row["n"]
    return counts


def backfill_grid(backfill, *, cells: int) -> dict:
    """At most `cells` cells: one per window for small backfills, else one per block of consecutive windows."""

    total = backfill.total_windows
    size = max(1, -(-total // cells))  # ceiling division
    if size == 1:
        windows = list(BackfillWindow.objects.filter(backfill=backfill)
                       .only("id", "seq", "low", "high", "status", "attempts", "run_id", "backfill_id").order_by("seq"))
        return {"block": 1, "windows": windows, "blocks": []}
    rows = (BackfillWindow.objects.filter(backfill=backfill).annotate(block=F("seq") / size)
            .values("block", "status").annotate(n=Count("id")).order_by("block"))
    blocks: dict[int, dict] = {}
    for row in rows:
        block = blocks.setdefault(row["block"], {"first": row["block"] * size, "counts": {}})
        block["counts"][row["status"]] = row["n"]
    out = []
    for number in sorted(blocks):
        block = blocks[number]
        block["last"] = min(block["first"] + size, total) - 1
        block["status"] = next(s for s in BLOCK_STATUS_ORDER if block["counts"].get(s))
        block["summary"] = ", ".join(f"{n} {s.lower()}" for s, n in sorted(block["counts"].items()))
        out.append(block)
    return {"block": size, "windows": [], "blocks": out}


def backfill_window_page(backfill, *, start: int, size: int) -> list:
    """Windows seq >= start, `size` of them, for the paged table under the grid."""

    return list(BackfillWindow.objects.filter(backfill=backfill, seq__gte=start)
                .only("id", "seq", "low", "high", "status", "attempts", "run_id", "backfill_id")
                .order_by("seq")[:size])


def status_words(status: str, failed: int) -> tuple[str, str]:
    """A backfill's status as its pill says it, and the pill's colour: a completed backfill with failed windows
    is not a success ("Completed with 1 failed window", in the failure colour)."""
    label = BackfillStatus(status).label
    if status == BackfillStatus.COMPLETED and failed:
        return f"{label} with {failed} failed window{'s' if failed != 1 else ''}", "failed"
    return label, str(status).lower()


def _span(low: str, high: str):
    """A stored window's size: a timedelta (datetime marks), an int (integer marks), None when open or unread."""
    a, b = parse_moment(low), parse_moment(high)
    if a is not None and b is not None and "T" in low and "T" in high:
        return b - a
    try:
        return int(high) - int(low)
    except (TypeError, ValueError):
        return None


def typical_window_seconds(schedule, size, *, last: int = 20, scan: int = 300) -> float | None:
    """The median run time of the schedule's last `last` successful runs whose window was of `size` (a timedelta
    or an integer count), among its latest `scan` successes: a backfill's ETA must not take a 5-minute live
    window's run time for a day's (issue 37). None: no such run yet."""
    rows = (Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED, started_at__isnull=False,
                               finished_at__isnull=False)
            .order_by("-id").values_list("started_at", "finished_at", "window_low", "window_high")[:scan])
    want = size if isinstance(size, (timedelta, int)) else None
    durations = [max((end - start).total_seconds(), 0.0) for start, end, low, high in rows
                 if want is not None and _span(low, high) == want][:last]
    return median(durations) if durations else None
