"""Deadlines: a live run not SUCCEEDED `deadline_seconds` after its logical time raises one alert.

A schedule with `deadline_seconds` promises its data by then: the run of a
logical time must have SUCCEEDED within that many seconds of it, whatever
held it up (queued behind a class limit, waiting on an upstream, retrying,
failed for good, blocked by a breaker). The governance loop looks for live
runs past their deadline and, for each, stores `deadline_missed_at`
(compare-and-set, so two loops cannot both claim it), writes an audit entry
and raises one DEADLINE_MISSED alert through the schedule's and its owning
team's channels (services/alerts.py). A run is marked at most once: it does
not alert again when a later tick still finds it unfinished.

Cancelled and skipped runs are decisions, not misses. A backfill window, a
re-run and a resumed run stand for an old logical time and have no
deadline. A run found more than LOOKBACK past its deadline is left alone, so
a deadline added to a schedule with a long history, or a governance loop
that was down for days, does not raise an alert per old run (the governance
loop's own lateness is its own alert).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q

from scheduler.models import AlertKind, Run, RunStatus, Schedule, TriggerKind
from scheduler.models.run import DEADLINE_WATCHED
from scheduler.services.oversight.alerts import alert_raise
from scheduler.services.common.audit import audit_record

#: runs marked per governance tick: a burst is worked off over the next ticks
BATCH = 200
#: how far past its deadline a run is still alerted when first found
LOOKBACK = timedelta(days=1)

#: not SUCCEEDED, and not a decision (CANCELLED, SKIPPED)
MISSABLE = [RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING, RunStatus.FAILED, RunStatus.BLOCKED]
#: runs that stand for an old logical time: no deadline
OLD_TIMES = [TriggerKind.BACKFILL, TriggerKind.RERUN, TriggerKind.RETRY]


def _watched():
    """Runs that can still be found past a deadline; over the partial index run_deadline_watch_idx."""
    return (Run.objects.filter(DEADLINE_WATCHED, backfill__isnull=True, status__in=MISSABLE)
            .exclude(trigger_kind__in=OLD_TIMES))


def deadline_of(run: Run) -> datetime | None:
    """When `run` must have SUCCEEDED: its logical time plus its schedule's deadline (None without either)."""
    seconds = run.schedule.deadline_seconds
    if run.logical_time is None or not seconds:
        return None
    return run.logical_time + timedelta(seconds=seconds)


def _overdue(now: datetime) -> Q:
    """Runs of schedules with a deadline whose deadline passed less than LOOKBACK ago.

    One range per distinct deadline, so the database compares plain
    logical times over the partial index (no date arithmetic per row, which
    SQLite and PostgreSQL spell differently); schedules share a handful of
    deadline values, so the condition stays short.
    """
    seconds = sorted(set(Schedule.objects.filter(deadline_seconds__isnull=False)
                         .values_list("deadline_seconds", flat=True)))
    q = Q(pk__in=[])
    for value in seconds:
        due = now - timedelta(seconds=value)
        q |= Q(schedule__deadline_seconds=value, logical_time__lt=due, logical_time__gte=due - LOOKBACK)
    return q


def deadline_misses(*, now: datetime, limit: int | None = None) -> list[Run]:
    """The runs past their deadline and not yet marked, oldest logical time first (at most BATCH)."""
    return list(_watched().filter(_overdue(now)).select_related("schedule")
                .defer("report", "error", "params").order_by("logical_time", "id")[:limit or BATCH])


def deadline_mark(*, run: Run, now: datetime) -> bool:
    """Mark one run as past its deadline: the audit entry and the alert; False when it is not (any longer)."""
    deadline = deadline_of(run)
    if deadline is None or deadline >= now:
        return False
    seconds = run.schedule.deadline_seconds
    late = int((now - deadline).total_seconds())
    state = run.shown_status + (f" ({run.reason})" if run.reason else "")  # STOPPING for a run asked to stop
    with transaction.atomic():
        # the run may have succeeded, or been cancelled, since it was read; another loop may have marked it
        if not _watched().filter(pk=run.pk).update(deadline_missed_at=now):
            return False
        run.deadline_missed_at = now
        audit_record(actor="governance", action="run.deadline_missed", target=run,
                     after={"deadline_seconds": seconds, "logical_time": run.logical_time.isoformat(),
                            "deadline": deadline.isoformat(), "status": run.status},
                     reason=f"not SUCCEEDED {seconds} s after its logical time; {late} s late, it is {state}"[:500],
                     at=now)
        alert_raise(
            kind=AlertKind.DEADLINE_MISSED, incident_key=f"deadline_missed:{run.pk}",
            message=(f"Run {run.pk} of '{run.schedule.name}' missed its deadline: not SUCCEEDED {seconds} s after "
                     f"its logical time {run.logical_time:%Y-%m-%d %H:%M:%S} UTC (due {deadline:%H:%M:%S} UTC, "
                     f"{late} s ago); it is {state}"[:2000]),
            schedule=run.schedule, run=run, now=now,
        )
    return True


def deadlines_check(*, now: datetime) -> list[int]:
    """Governance: mark the runs that missed their deadline since the last tick (at most BATCH); their ids."""
    return [run.pk for run in deadline_misses(now=now) if deadline_mark(run=run, now=now)]


__all__ = ["BATCH", "LOOKBACK", "MISSABLE", "OLD_TIMES", "deadline_mark", "deadline_misses", "deadline_of",
           "deadlines_check"]
