"""The compare-and-set that makes a run final, and the signals it sends after commit.

The primitive under scheduler/services/runs/end.py (which decides how a run
ends) and scheduler/services/runs/downstream.py (which blocks the dependents of a
run that ended); `run_refused` records a trigger that may not run as a run
born BLOCKED or SKIPPED.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction

from scheduler import signals
from scheduler.models import Run, RunStatus, Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.integrations.lineage import lineage_run_ended
from scheduler.services.history.outcomes import outcomes_record
from scheduler.services.runs.queue import run_build
from scheduler.services.history.tally import runs_ended

S = RunStatus

# Which statuses may become which final status. RUNNING -> QUEUED (a lost
# worker's re-queue) is the one non-final move finish.py owns as well.
FINAL_FROM: dict[str, frozenset[str]] = {
    S.SUCCEEDED: frozenset({S.RUNNING}),
    S.FAILED: frozenset({S.RUNNING, S.QUEUED, S.WAITING}),
    S.SKIPPED: frozenset({S.RUNNING, S.QUEUED, S.WAITING}),
    S.BLOCKED: frozenset({S.QUEUED, S.WAITING}),
    S.CANCELLED: frozenset({S.QUEUED, S.WAITING, S.RUNNING}),
}


def set_fields(run: Run, **fields: Any) -> None:
    """What a compare-and-set wrote, onto the in-memory run."""
    for key, value in fields.items():
        setattr(run, key, value)


def finalize(run: Run, *, new: str, now: datetime, extra_filter: dict | None = None, **fields: Any) -> bool:
    """The compare-and-set to a final status; updates `run` in place and queues the signal."""
    old = run.status
    if new not in FINAL_FROM or old not in FINAL_FROM[new]:
        raise ServiceError(f"a {old} run cannot become {new}", field="status")
    fields.setdefault("finished_at", now)
    if not Run.objects.filter(pk=run.pk, status=old, **(extra_filter or {})).update(status=new, **fields):
        return False
    if new in S.final():  # a lost run's re-queue (RUNNING -> QUEUED) is not an end
        runs_ended(new, [run.pk])
    set_fields(run, status=new, **fields)
    outcomes_record([run])  # the schedule's latest success or failure (services/outcomes.py)
    lineage_run_ended(run=run, old=old, now=now)  # its end event (if it began), in this transaction
    send_after_commit(run, new, old)
    return True


def send_after_commit(run: Run, new: str, old: str) -> None:
    def send() -> None:
        # the in-memory run already holds the committed values: no re-fetch
        if new in (S.SUCCEEDED, S.SKIPPED):
            signals.run_completed.send(sender=Run, run=run)
        elif new == S.FAILED:
            signals.run_failed.send(sender=Run, run=run, final=True)
        elif new == S.QUEUED and old == S.RUNNING:
            signals.run_failed.send(sender=Run, run=run, final=False)
        elif new == S.BLOCKED:
            signals.run_blocked.send(sender=Run, run=run)

    if new in (S.SUCCEEDED, S.SKIPPED, S.FAILED, S.BLOCKED) or (new, old) == (S.QUEUED, S.RUNNING):
        transaction.on_commit(send)


def run_refused(*, schedule: Schedule, status: str, reason: str, trigger_kind: str, trigger_key: str,
                now: datetime, blocked_by: Schedule | None = None, **build: Any) -> Run | None:
    """A trigger that may not run is recorded as a run born BLOCKED or SKIPPED; None on a double fire."""
    if status not in (S.BLOCKED, S.SKIPPED):
        raise ServiceError(f"a refused trigger is BLOCKED or SKIPPED, not {status}", field="status")
    run = run_build(schedule=schedule, trigger_kind=trigger_kind, trigger_key=trigger_key, status=status,
                    reason=reason, blocked_by=blocked_by, now=now, **build)
    try:
        with transaction.atomic():
            run.save(force_insert=True)
            runs_ended(status, [run.pk])
    except IntegrityError:
        return None  # the unique (schedule, trigger_key) constraint: recorded already
    send_after_commit(run, status, S.QUEUED)
    return run


__all__ = ["FINAL_FROM", "finalize", "run_refused", "send_after_commit", "set_fields"]
