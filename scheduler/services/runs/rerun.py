"""Re-run a finished run: same params, same window, optionally followed by its downstream schedules."""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.models import Run, TriggerKind
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.runs.breakers import breaker_forecast, breaker_reset
from scheduler.services.common.errors import ServiceError, check_text
from scheduler.services.runs.queue import run_build
from scheduler.services.access.teams import authorize


def run_rerun(*, run: Run, actor: Any, downstream: bool = False, reason: str = "", reset_breaker: bool = False,
              now: datetime | None = None) -> Run:
    """Queue a new run of `run`'s schedule with its params, window and logical time.

    With `downstream=False` the new run's end neither starts nor blocks the
    schedules that depend on it ("re-run just this"); with `downstream=True`
    it ends like any run, so upstream-triggered schedules follow it as they
    would have followed the original.
    """
    reason = check_text(reason, field="reason", max_length=500).strip()
    if not run.is_final:
        raise ServiceError(f"run {run.pk} is still {run.status}; only a finished run can be re-run", field="run")
    if run.backfill_id is not None:
        raise ServiceError(
            f"run {run.pk} is a window of backfill {run.backfill_id}; retry it from the backfill", field="run"
        )
    schedule = run.schedule
    if not schedule.enabled and not reason:
        raise ServiceError(
            f"schedule '{schedule.name}' is disabled: give a reason to re-run it anyway", field="reason"
        )
    now = now or timezone.now()
    who, _kind = actor_name(actor)
    window = (run.window_low, run.window_high) if (run.window_low or run.window_high) else None
    if reset_breaker:  # "reset the breaker and re-run": the actor must be allowed both
        authorize(actor=actor, perm="scheduler.reset_breaker", obj=schedule)
    with transaction.atomic():
        if reset_breaker:
            breaker_reset(schedule=schedule, actor=actor, reason=reason or f"reset to re-run run {run.pk}", now=now)
        new = run_build(
            schedule=schedule,
            trigger_kind=TriggerKind.RERUN,
            trigger_key=f"rerun:{run.pk}:{uuid.uuid4().hex}",
            params=dict(run.params or {}),
            logical_time=run.logical_time,
            triggered_by=who,
            window=window,
            now=now,
        )
        new.rerun_of, new.propagate = run, downstream
        new.save(force_insert=True)  # a fresh uuid in the key: no double-fire collision to handle
        audit_record(
            actor=actor, action="run.rerun", target=run,
            after={"run": new.pk, "downstream": downstream, "window": list(window) if window else None},
            reason=reason, at=now,
        )
    return new


def rerun_offers(run: Run, *, now: datetime | None = None) -> dict:
    """Which re-run buttons the run page offers, and why none when it offers none; `breaker` says what the
    schedule's breaker would do with a re-run queued now (BLOCKED while it is open: the page tells before)."""
    if not run.is_final:
        return {"rerun": False, "downstream": False, "why_not": "it has not finished yet"}
    if run.backfill_id is not None:
        return {"rerun": False, "downstream": False, "why_not": "backfill windows are retried from their backfill"}
    return {
        "rerun": True,
        "downstream": run.schedule.downstream.exists(),
        "why_not": "",
        "needs_reason": not run.schedule.enabled,
        "breaker": breaker_forecast(run.schedule, now=now or timezone.now()),
    }
