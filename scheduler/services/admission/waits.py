"""Why a queued or waiting run has not started yet: the read side of the gate (pages, commands, the host).

`explain_wait` asks everything for one run (its page); `wait_reasons` gives the lists (runs, overview) a shorter
answer for any number of runs in one statement: the runs that hold the full classes are named in both, and a
waiting run says when it fails (its schedule's max wait)."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q

from scheduler.core.overlap import SERIAL_POLICIES
from scheduler.models import BackfillStatus, BreakerStatus, Run, RunStatus, Schedule
from scheduler.services.admission.clusters import is_unknown_target_reason, unknown_target_deadline
from scheduler.services.admission.dispatch import _held_back
from scheduler.services.runs import dependencies

S = RunStatus
HOLDERS_NAMED = 3  # the runs a "class full" reason names (the oldest admitted: those likeliest to end first)


def wait_deadline(run: Run) -> datetime | None:
    """When governance fails a WAITING run as a dependency timeout (its schedule's max wait after it was queued)."""
    try:
        return run.queued_at + timedelta(seconds=run.schedule.max_wait_seconds)
    except OverflowError:
        return None  # a wait longer than the calendar: it never times out


def _deadline_text(run: Run) -> str:
    deadline = wait_deadline(run)
    if deadline is None:
        return "it never times out"
    return (f"it fails as a dependency timeout at {deadline:%Y-%m-%d %H:%M:%S} UTC "
            f"(max wait {run.schedule.max_wait_seconds} s)")


def class_holders(class_ids) -> dict[int, list[tuple]]:
    """{class id: [(run id, schedule name, owner id), ...]} of the RUNNING runs of those classes, oldest admitted
    first: one statement (a class holds at most its limit)."""
    out: dict[int, list[tuple]] = {}
    ids = [pk for pk in set(class_ids) if pk is not None]
    if not ids:
        return out
    for row in (Run.objects.filter(status=S.RUNNING, workload_class_id__in=ids)
                .order_by("workload_class_id", "admitted_at", "id")
                .values_list("workload_class_id", "pk", "schedule__name", "schedule__owner_id")):
        out.setdefault(row[0], []).append(row[1:])
    return out


def holders_text(wc, holders: list[tuple], *, team_ids=None) -> str:
    """"class 'heavy' full (2/2): held by run #12 of 'orders', run #13 of 'billing'" ('' while `wc` has a free
    slot); `team_ids`: another team's run is not named."""
    if len(holders) < wc.concurrency_limit:
        return ""
    text = f"class '{wc.name}' full ({len(holders)}/{wc.concurrency_limit})"
    if not holders:
        return text
    named = [f"run #{pk} of '{name}'" if team_ids is None or owner in team_ids else "a run of another team"
             for pk, name, owner in holders[:HOLDERS_NAMED]]
    more = len(holders) - HOLDERS_NAMED
    return f"{text}: held by {', '.join(named)}" + (f" and {more} more" if more > 0 else "")


def _breaker_until(schedule: Schedule, now: datetime) -> datetime | None:
    if schedule.breaker_status == BreakerStatus.OPEN and schedule.breaker_opened_at is not None:
        until = schedule.breaker_opened_at + timedelta(seconds=schedule.breaker_current_cooldown_seconds or 0)
        return until if until > now else None
    return None


def wait_reasons(runs, *, now: datetime, team_ids=None) -> dict[int, str]:
    """{run id: why it has not started} for the QUEUED and WAITING runs among `runs` (which carry their
    schedule's max wait and breaker), in at most one statement: the lists' answer, shorter than `explain_wait`."""
    waiting = [run for run in runs if run.status in (S.QUEUED, S.WAITING)]
    holders = class_holders(run.workload_class_id for run in waiting if run.status == S.QUEUED)
    out = {}
    for run in waiting:
        if run.status == S.WAITING:
            out[run.pk] = f"{run.reason or 'waiting for its upstreams'}; {_deadline_text(run)}"
            continue
        until = _breaker_until(run.schedule, now)
        if run.not_before is not None and run.not_before > now:
            out[run.pk] = f"retry not before {run.not_before:%Y-%m-%d %H:%M:%S} UTC"
        elif until is not None:
            out[run.pk] = f"circuit open until {until:%Y-%m-%d %H:%M:%S} UTC"
        else:
            out[run.pk] = (holders_text(run.workload_class, holders.get(run.workload_class_id, []), team_ids=team_ids)
                           or run.reason
                           or "next in line: the dispatcher admits it at its next tick")
    return out


def explain_wait(run: Run, now: datetime) -> str:
    """One line saying why a QUEUED or WAITING run has not started yet."""
    if run.status == S.WAITING:
        verdict = dependencies.verdict_for(run)
        return f"{verdict.reason or run.reason or 'waiting for upstreams'}; {_deadline_text(run)}"
    if run.status != S.QUEUED:
        return f"not waiting: the run is {run.status}"
    if is_unknown_target_reason(run.reason):
        return f"{run.reason} (it waits for new code until {unknown_target_deadline(run):%Y-%m-%d %H:%M:%S} UTC)"
    schedule = run.schedule
    if run.backfill_id is not None and run.backfill.status != BackfillStatus.ACTIVE:
        return f"backfill {run.backfill_id} {run.backfill.status.lower()}"
    if run.not_before is not None and run.not_before > now:
        return f"retry not before {run.not_before:%Y-%m-%d %H:%M:%S} UTC"
    if run.backfill_id is None and schedule.depends_on.exists():
        verdict = dependencies.verdict_for(run)
        if verdict.action != "admit":
            return verdict.reason
    running_watermarked = set()
    if run.backfill_id is None and schedule.overlap in SERIAL_POLICIES:
        ahead = (Run.objects.filter(schedule_id=schedule.pk, status=S.RUNNING, backfill__isnull=True)
                 .values("pk", "stop_requested_at", "stop_kind").first())
        if ahead is not None and ahead["stop_requested_at"] is not None:
            return (f"previous run {ahead['pk']} of this schedule is stopping ({ahead['stop_kind']}); "
                    "this one starts once its work has ended")
        if ahead is not None:
            running_watermarked.add(schedule.pk)
    held = _held_back(run, now=now, running_watermarked=running_watermarked)
    if held:
        return held
    until = _breaker_until(schedule, now)
    if until is not None:
        return f"circuit open until {until:%Y-%m-%d %H:%M:%S} UTC"
    wc = run.workload_class
    full = holders_text(wc, class_holders([wc.pk]).get(wc.pk, []))
    if full:
        return full
    ahead = Run.objects.filter(status=S.QUEUED, workload_class_id=wc.pk).filter(
        Q(priority__gt=run.priority)
        | Q(priority=run.priority, queued_at__lt=run.queued_at)
        | Q(priority=run.priority, queued_at=run.queued_at, id__lt=run.pk)
    ).count()
    return f"position {ahead + 1} in queue"


__all__ = ["class_holders", "explain_wait", "holders_text", "wait_deadline", "wait_reasons"]
