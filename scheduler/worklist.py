"""The read side of the overview's "Failures" work list: one item per schedule, not one per failed run.

An item is open (its last failure is neither followed by a success nor acknowledged), acknowledged (a person
said why it is handled; a later failure opens it again), or recovered (a run of the schedule succeeded after
its last failure). It looks at the latest CANDIDATE_RUNS failed runs, so its cost does not grow with history.
"""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import OuterRef, Subquery

from scheduler.models import FailureAck, Run, RunStatus, Schedule

CANDIDATE_RUNS = 500  # the latest failed runs looked at: older failures have long been dealt with or recovered
COUNT_HOURS = 24  # an item counts its schedule's failures in the day up to its last failure
RECOVERED_SHOWN = 10


def _owned(qs, team_ids):
    return qs if team_ids is None else qs.filter(schedule__owner_id__in=list(team_ids))


def failure_worklist(now: datetime, *, team_ids=None, limit: int = 50) -> dict:
    """{"open": [...], "acknowledged": [...], "recovered": [...]}; each item is a dict with the schedule, its
    last failed `run`, `count` (failures in the COUNT_HOURS up to it), `ack` / `earlier_ack` and `recovered_by`."""
    recent = list(_owned(Run.objects.filter(status=RunStatus.FAILED), team_ids)
                  .order_by("-id").values_list("id", "schedule_id")[:CANDIDATE_RUNS])
    last_ids: dict[int, int] = {}
    for run_id, schedule_id in recent:
        last_ids.setdefault(schedule_id, run_id)
    if not last_ids:
        return {"open": [], "acknowledged": [], "recovered": [], "count_hours": COUNT_HOURS}
    last_runs = {r.schedule_id: r for r in Run.objects.filter(pk__in=last_ids.values())
                 .select_related("schedule", "schedule__owner")
                 .only("id", "status", "reason", "error", "finished_at", "queued_at", "schedule_id",
                       "schedule__id", "schedule__name", "schedule__owner_id", "schedule__owner__name",
                       "schedule__breaker_status")}
    since = min((r.finished_at or r.queued_at) for r in last_runs.values()) - timedelta(hours=COUNT_HOURS)
    counts: dict[int, int] = defaultdict(int)
    for schedule_id, finished in (Run.objects.filter(status=RunStatus.FAILED, schedule_id__in=last_ids,
                                                     finished_at__gte=since)
                                  .values_list("schedule_id", "finished_at")):
        last = last_runs[schedule_id]
        if last.finished_at and last.finished_at - timedelta(hours=COUNT_HOURS) <= finished <= last.finished_at:
            counts[schedule_id] += 1
    # the latest success's time and id: one backward seek of run_sched_status_idx (schedule, status, finished_at)
    # per schedule, not an aggregate over every success the schedules ever had
    latest = (Run.objects.filter(schedule=OuterRef("pk"), status=RunStatus.SUCCEEDED, finished_at__isnull=False)
              .order_by("-finished_at"))
    successes = {schedule_id: {"schedule_id": schedule_id, "at": at, "pk": pk}
                 for schedule_id, at, pk in Schedule.objects.filter(pk__in=last_ids)
                 .annotate(at=Subquery(latest.values("finished_at")[:1]), success=Subquery(latest.values("id")[:1]))
                 .filter(at__isnull=False).values_list("pk", "at", "success")}
    acks: dict[int, FailureAck] = {}
    for ack in FailureAck.objects.filter(schedule_id__in=last_ids).order_by("schedule_id", "-up_to_run_id", "-id"):
        acks.setdefault(ack.schedule_id, ack)
    work: dict[str, list[dict]] = {"open": [], "acknowledged": [], "recovered": []}
    for schedule_id, run in last_runs.items():
        success, ack = successes.get(schedule_id), acks.get(schedule_id)
        item = {"schedule": run.schedule, "run": run, "count": max(1, counts[schedule_id]), "ack": None,
                "earlier_ack": None, "recovered_by": None}
        if success is not None and success["at"] and run.finished_at and success["at"] > run.finished_at:
            item["recovered_by"] = success
            work["recovered"].append(item)
        elif ack is not None and ack.up_to_run_id >= run.pk:
            item["ack"] = ack
            work["acknowledged"].append(item)
        else:
            item["earlier_ack"] = ack
            work["open"].append(item)
    for items in work.values():
        items.sort(key=lambda i: (i["run"].finished_at or now, i["run"].pk), reverse=True)
    return {"open": work["open"][:limit], "acknowledged": work["acknowledged"][:limit],
            "recovered": work["recovered"][:RECOVERED_SHOWN], "count_hours": COUNT_HOURS}
