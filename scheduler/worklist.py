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
    # the candidates as values: sorting them into the three lists needs no object (four per candidate, schedule,
    # team and run included, cost more than every query of the page); only the items shown are read whole
    rows = list(rows.annotate(ack_id=Subquery(latest_ack)).order_by("-failure_id").values_list(
        "schedule_id", "failure_id", "failure_at", "success_id", "success_at", "ack_id")[:CANDIDATES])
    acks = FailureAck.objects.in_bulk([row[5] for row in rows if row[5]])
    work: dict[str, list[tuple]] = {"open": [], "acknowledged": [], "recovered": []}
    for schedule_id, run_id, finished, success_id, success_at, ack_id in rows:
        ack, extra = acks.get(ack_id), {}
        if success_at and finished and success_at > finished:
            state, extra["recovered_by"] = "recovered", {"schedule_id": schedule_id, "at": success_at,
                                                         "pk": success_id}
        elif ack is not None and ack.up_to_run_id >= run_id:
            state, extra["ack"] = "acknowledged", ack
        else:
            state, extra["earlier_ack"] = "open", ack
        work[state].append((finished or now, run_id, extra))
    shown: dict[str, list[tuple]] = {}
    for state, size in (("open", limit), ("acknowledged", limit), ("recovered", RECOVERED_SHOWN)):
        shown[state] = sorted(work[state], key=lambda entry: entry[:2], reverse=True)[:size]
    runs = _failed_runs([run_id for entries in shown.values() for _, run_id, _ in entries])
    out: dict = {"count_hours": COUNT_HOURS}
    for state, entries in shown.items():
        out[state] = [{"schedule": runs[run_id].schedule, "run": runs[run_id], "count": 1, "ack": None,
                       "earlier_ack": None, "recovered_by": None, **extra}
                      for _, run_id, extra in entries if run_id in runs]  # a run pruned meanwhile: left out
    _count_failures([item for state in ("open", "acknowledged", "recovered") for item in out[state]])
    return out


def _failed_runs(ids: list[int]) -> dict[int, Run]:
    """The shown items' failed runs with their schedules and teams; an item shows the start of the error when
    the run gave no reason, not every traceback whole."""
    if not ids:
        return {}
    runs = {}
    for run in (Run.objects.filter(pk__in=ids).select_related("schedule", "schedule__owner")
                .only("id", "status", "reason", "finished_at", "queued_at", "schedule_id", "schedule__id",
                      "schedule__name", "schedule__owner_id", "schedule__owner__name", "schedule__breaker_status")
                .annotate(error_head=Substr("error", 1, ERROR_SHOWN))):
        run.error = run.error_head
        runs[run.pk] = run
    return runs


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
