"""The read side of the overview's "Failures" work list: one item per schedule, not one per failed run.

An item is open (its last failure is neither followed by a success nor acknowledged), acknowledged (a person
said why it is handled; a later failure opens it again), or recovered (a run of the schedule succeeded after
its last failure). It starts from each schedule's kept latest failure and latest success (LatestOutcome,
services/outcomes.py) of the CANDIDATES schedules that failed last, so no read grows with the history or with
the runs a day: a row per schedule, the acknowledgement each one's latest (one index seek), and the failures
counted for the items shown only: those since the schedule's last success before its last failure (issue 37), found
and counted in two statements for all of them (streaks.py).
"""
from __future__ import annotations

from datetime import datetime

from django.db.models import OuterRef, Subquery
from django.db.models.functions import Substr

from scheduler.models import FailureAck, LatestOutcome, Run
from scheduler.streaks import failure_streaks

CANDIDATES = 500  # the schedules whose last failure is the most recent: older ones have long been dealt with
RECOVERED_SHOWN = 10
ERROR_SHOWN = 400  # characters of a failed run's error an item keeps (the pages show at most 300)


def failure_worklist(now: datetime, *, team_ids=None, limit: int = 50) -> dict:
    """{"open": [...], "acknowledged": [...], "recovered": [...]}; each item is a dict with the schedule, its
    last failed `run`, `count` and `streak` (its failures since the success before it, streaks.Streak), `ack` /
    `earlier_ack` and `recovered_by`."""
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
    out: dict = {}
    for state, entries in shown.items():
        out[state] = [{"schedule": runs[run_id].schedule, "run": runs[run_id], "count": 1, "streak": None, "ack": None,
                       "earlier_ack": None, "recovered_by": None, **extra}
                      for _, run_id, extra in entries if run_id in runs]  # a run pruned meanwhile: left out
    _count_failures([item for state in ("open", "acknowledged", "recovered") for item in out[state]], now=now)
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


def _count_failures(items: list[dict], *, now: datetime) -> None:
    """Each item's failures since its schedule's last success before its last failure (backfill windows
    included, as the item's last failure may be one): two statements for all the items (streaks.py)."""
    streaks = failure_streaks({item["schedule"].pk: item["run"].pk for item in items}, now=now, live=False)
    for item in items:
        streak = streaks.get(item["schedule"].pk)
        if streak is not None:
            item["streak"], item["count"] = streak, streak.count
