"""Counters of runs by final status, kept as runs end, so `/metrics` never counts the ledger.

`runs_tallied` is called (by `runs_ended`, with the timeline's hour counts) in the transaction that makes runs
final (services/finish.py, finalize.py): the count commits or rolls back with the runs. It only inserts, so two
workers ending runs at once never wait on each other's counter row. `tally_fold` (a governance job) sums the rows
into one per status, keeping the table a few rows
long; `tally_totals` is what a scrape reads. The totals only grow: a prune deletes runs, not their count.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from datetime import datetime

from django.db import transaction
from django.db.models import Sum

from scheduler.models import RunStatus, RunTally
from scheduler.services.history.hour_counts import runs_counted

FOLD_BATCH = 10_000


def runs_tallied(statuses: Iterable[str]) -> None:
    """Count runs that just became final with these statuses (one row per status, in the caller's transaction)."""
    counts = Counter(str(s) for s in statuses)
    unknown = set(counts) - RunStatus.final()
    if unknown:
        raise ValueError(f"status: {sorted(unknown)} is not a final status")
    if counts:
        RunTally.objects.bulk_create([RunTally(status=status, n=n) for status, n in sorted(counts.items())])


def runs_ended(status: str, run_ids: Collection[int]) -> None:
    """Both counts of runs that just became final with `status`: the status counters and the timeline's hours
    (hour_counts.py), in the transaction of their compare-and-set."""
    runs_tallied([status] * len(run_ids))
    runs_counted(run_ids)


def tally_totals() -> dict[str, int]:
    """Runs that became final since the counters began, by status (every final status, 0 when none)."""
    totals = {status: 0 for status in sorted(RunStatus.final())}
    for status, n in RunTally.objects.values_list("status").annotate(total=Sum("n")).order_by():
        totals[status] = int(n or 0)
    return totals


def tally_fold(*, now: datetime | None = None, batch: int = FOLD_BATCH) -> int:
    """Sum the oldest `batch` tally rows into one row per status; the number of rows removed.

    The rows are locked, and the fold is given up (rolled back) if the rows it
    deletes are not exactly those it summed, so two folds at once never count
    a row twice and a row committed meanwhile is never lost.
    """
    with transaction.atomic():
        rows = list(RunTally.objects.select_for_update().order_by("id").values_list("id", "status", "n")[:batch])
        if len(rows) <= len({status for _, status, _ in rows}):
            return 0  # already one row per status
        sums: Counter[str] = Counter()
        for _, status, n in rows:
            sums[status] += n
        # by id range, not an IN list of 10,000 parameters; a row committed meanwhile below the top makes the
        # count differ, and the fold is given up
        deleted, _ = RunTally.objects.filter(id__lte=rows[-1][0]).delete()
        if deleted != len(rows):
            transaction.set_rollback(True)
            return 0
        RunTally.objects.bulk_create([RunTally(status=status, n=n) for status, n in sorted(sums.items())])
    return len(rows) - len(sums)


__all__ = ["runs_ended", "runs_tallied", "tally_fold", "tally_totals"]
