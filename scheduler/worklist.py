"""The read side of the overview's "Failures" work list: one item per schedule, not one per failed run.

An item is open (its last failure is neither followed by a success nor acknowledged), acknowledged (a person
said why it is handled; a later failure opens it again), or recovered (a run of the schedule succeeded after
its last failure). It starts from each schedule's kept latest failure and latest success (LatestOutcome,
services/outcomes.py) of the CANDIDATES schedules that failed last, so no read grows with the history or with
the runs a day: a row per schedule, the acknowledgement each one's latest (one index seek), and the failures
counted for the items shown only, each in its own day (issue 25).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Substr

from scheduler.models import FailureAck, LatestOutcome, Run, RunStatus

CANDIDATES = 500  # the schedules whose last failure is the most recent: older ones have long been dealt with
COUNT_HOURS = 24  # an item counts its schedule's failures in the day up to its last failure
RECOVERED_SHOWN = 10
ERROR_SHOWN = 400  # characters of a failed run's error an item keeps (the pages show at most 300)


def failure_worklist(now: datetime, *, team_ids=None, limit: int = 50) -> dict:
    """{"open": [...], "acknowledged": [...], "recovered": [...]}; each item is a dict with the schedule, its
    last failed `run`, `count` (failures in the COUNT_HOURS up to it), `ack` / `earlier_ack` and `recovered_by`."""
    latest_ack = (FailureAck.objects.filter(schedule_id=OuterRef("schedule_id"))
                  .order_by("-up_to_run_id", "-id").values("id")[:1])  # failureack_schedule_run: one seek
    rows = LatestOutcome.objects.filter(failure__isnull=False)
    if team_ids is not None:
        rows = rows.filter(schedule__owner_id__in=list(team_ids))
    rows = list(rows.select_related("schedule", "schedule__owner", "failure")
                .only("schedule_id", "success_id", "success_at", "failure_id",
                      "schedule__id", "schedule__name", "schedule__owner_id", "schedule__owner__name",
                      "schedule__breaker_status", "failure__id", "failure__status", "failure__reason",
                      "failure__finished_at", "failure__queued_at", "failure__schedule_id")
                # an item shows the start of the error when the run gave no reason: not every traceback whole
                .annotate(ack_id=Subquery(latest_ack), error_head=Substr("failure__error", 1, ERROR_SHOWN))
                .order_by("-failure_id")[:CANDIDATES])
    acks = FailureAck.objects.in_bulk([row.ack_id for row in rows if row.ack_id])
    work: dict[str, list[dict]] = {"open": [], "acknowledged": [], "recovered": []}
    for row in rows:
        run, ack = row.failure, acks.get(row.ack_id)
        if run is None:  # pruned between the row's read and the run's: the row is being moved on
            continue
        run.schedule, run.error = row.schedule, row.error_head
        item = {"schedule": row.schedule, "run": run, "count": 1, "ack": None, "earlier_ack": None,
                "recovered_by": None}
        if row.success_at and run.finished_at and row.success_at > run.finished_at:
            item["recovered_by"] = {"schedule_id": row.schedule_id, "at": row.success_at, "pk": row.success_id}
            work["recovered"].append(item)
        elif ack is not None and ack.up_to_run_id >= run.pk:
            item["ack"] = ack
            work["acknowledged"].append(item)
        else:
            item["earlier_ack"] = ack
            work["open"].append(item)
    for items in work.values():
        items.sort(key=lambda i: (i["run"].finished_at or now, i["run"].pk), reverse=True)
    shown = {"open": work["open"][:limit], "acknowledged": work["acknowledged"][:limit],
             "recovered": work["recovered"][:RECOVERED_SHOWN]}
    _count_failures([item for items in shown.values() for item in items])
    return {**shown, "count_hours": COUNT_HOURS}


def _count_failures(items: list[dict]) -> None:
    """Each item's failures in the COUNT_HOURS up to its last one, in one query: a range of run_sched_status_idx
    (schedule, status, finished_at) per item, never the days between one item's last failure and another's."""
    ranges = Q()
    for item in items:
        last = item["run"].finished_at
        if last is not None:
            ranges |= Q(schedule_id=item["schedule"].pk, status=RunStatus.FAILED,
                        finished_at__gte=last - timedelta(hours=COUNT_HOURS), finished_at__lte=last)
    if not ranges:
        return
    counts = dict(Run.objects.filter(ranges).order_by().values_list("schedule_id").annotate(n=Count("id")))
    for item in items:
        item["count"] = max(1, counts.get(item["schedule"].pk, 0))
