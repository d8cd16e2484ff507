"""A backfill's window grid, bounded whatever the number of windows."""

from __future__ import annotations

from django.db.models import Count, F

from scheduler.models import BackfillWindow, WindowStatus


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
