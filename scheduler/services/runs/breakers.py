"""Per-schedule circuit breakers: the pure state machine applied to a row."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler import signals
from scheduler.core import BreakerSettings, BreakerState, BreakerStatus, cooldown_over, record_failure, record_success
from scheduler.core import admit as core_admit
from scheduler.models import Run, Schedule
from scheduler.services.common.audit import audit_record


def breaker_settings(schedule: Schedule) -> BreakerSettings:
    return BreakerSettings(
        threshold=schedule.breaker_threshold,
        cooldown=timedelta(seconds=schedule.breaker_cooldown_seconds),
        max_cooldown=timedelta(seconds=max(schedule.breaker_max_cooldown_seconds, schedule.breaker_cooldown_seconds)),
    )


def breaker_state(schedule: Schedule) -> BreakerState:
    cooldown = schedule.breaker_current_cooldown_seconds
    return BreakerState(
        status=BreakerStatus(schedule.breaker_status),
        failures=schedule.breaker_failures,
        opened_at=schedule.breaker_opened_at,
        cooldown=timedelta(seconds=cooldown) if cooldown else None,
        trial_in_flight=schedule.breaker_trial_run_id is not None,
    )


def _locked(schedule_id: int) -> Schedule:
    # The row lock serialises breaker changes between dispatchers and workers
    # (PostgreSQL); SQLite's IMMEDIATE transactions already serialise writers.
    # NO KEY, so run inserts (their FK check takes KEY SHARE) are not blocked.
    return Schedule.objects.select_for_update(no_key=True).get(pk=schedule_id)


def _save(schedule: Schedule, new: BreakerState, *, trial_run_id: int | None, actor: Any, reason: str, now: datetime,
          action: str | None = None, before: dict | None = None) -> None:
    """Store `new`; a status change (or an explicit `action`) is audited and signalled after commit."""
    old_status = schedule.breaker_status
    before = before or {"status": old_status, "failures": schedule.breaker_failures}
    fields = {
        "breaker_status": new.status.value,
        "breaker_failures": new.failures,
        "breaker_opened_at": new.opened_at,
        "breaker_current_cooldown_seconds": int(new.cooldown.total_seconds()) if new.cooldown else None,
        "breaker_trial_run_id": trial_run_id,
    }
    Schedule.objects.filter(pk=schedule.pk).update(**fields)
    for key, value in fields.items():
        setattr(schedule, key, value)
    if old_status != new.status.value or action:
        audit_record(
            actor=actor or "breaker",
            action=action or f"breaker.{new.status.value}",
            target=schedule,
            before=before,
            after={"status": new.status.value, "failures": new.failures,
                   "cooldown_seconds": fields["breaker_current_cooldown_seconds"]},
            reason=reason,
            at=now,
        )
        schedule_id, old, new_status = schedule.pk, old_status, new.status.value

        def send() -> None:
            fresh = Schedule.objects.filter(pk=schedule_id).first()
            if fresh is not None:
                signals.circuit_breaker_changed.send(
                    sender=Schedule, schedule=fresh, old=old, new=new_status, reason=reason
                )

        transaction.on_commit(send)


def breaker_admit(*, schedule_id: int, run: Run, now: datetime) -> tuple[bool, str]:
    """May `run` start under the breaker? Call inside the admission transaction."""
    loaded = run.schedule if run.schedule_id == schedule_id else None
    if loaded is not None and loaded.breaker_status == BreakerStatus.CLOSED:
        # the row was read in this transaction: a closed breaker needs no lock (the hot path)
        return True, ""
    schedule = _locked(schedule_id)
    if schedule.breaker_status == BreakerStatus.CLOSED:
        return True, ""
    if schedule.breaker_status == BreakerStatus.HALF_OPEN and schedule.breaker_trial_run_id == run.pk:
        # the test run itself, re-queued after its worker was lost: it is still the test run
        return True, ""
    state = breaker_state(schedule)
    ok, new, reason = core_admit(state, breaker_settings(schedule), now)
    if ok and new != state:
        _save(
            schedule, new, trial_run_id=run.pk, actor="breaker", reason="cooldown over: one test run admitted", now=now
        )
    return ok, reason


def breaker_forecast(schedule: Schedule, *, now: datetime) -> dict:
    """What the breaker would do with a run queued now, without changing it: {"admits": bool, "trial": the run
    would be its test run, "reason": why not ("circuit open"), "reopens_at": when one test run is admitted}."""
    state = breaker_state(schedule)
    ok, new, reason = core_admit(state, breaker_settings(schedule), now)
    return {"admits": ok, "trial": ok and state.status != BreakerStatus.CLOSED, "reason": "" if ok else reason,
            "reopens_at": state.reopens_at, "status": state.status.value, "failures": state.failures}


def breaker_on_result(*, schedule_id: int, run: Run, succeeded: bool, now: datetime) -> None:
    """Count a final success or failure against the schedule row as it is now. Call inside the run's final
    transaction.

    Only the test run's own result decides a half-open breaker; any other run's end is recorded (a failure
    is counted) and leaves the state alone. A success zeroes the count of a breaker that is closed.
    """
    loaded = run.schedule if run.schedule_id == schedule_id else None
    if succeeded and loaded is not None and loaded.breaker_status == BreakerStatus.CLOSED:
        # Admitted while the breaker was closed, so not its test run: whatever the row says now, the success
        # only zeroes the count of a breaker that is still closed (one statement, no lock: the hot path).
        breaker_successes(schedule_ids=[schedule_id])
        return
    schedule = _locked(schedule_id)
    state = breaker_state(schedule)
    if succeeded:
        if state.status == BreakerStatus.CLOSED:
            if state.failures:
                _save(schedule, BreakerState(), trial_run_id=None, actor="breaker", reason=f"run {run.pk} succeeded",
                      now=now)
            return
        if state.status == BreakerStatus.HALF_OPEN and schedule.breaker_trial_run_id == run.pk:
            new = record_success(state, breaker_settings(schedule))
            _save(schedule, new, trial_run_id=None, actor="breaker", reason=f"test run {run.pk} succeeded", now=now)
        # a run admitted before the breaker opened that succeeds late decides nothing: the state stays
        return
    if state.status == BreakerStatus.HALF_OPEN and schedule.breaker_trial_run_id != run.pk:
        # A run admitted before the breaker opened failed late (with or without
        # a test run in flight): count it, but only the test run's own result
        # re-opens the breaker and doubles the cooldown.
        trial = schedule.breaker_trial_run_id
        new = BreakerState(status=state.status, failures=state.failures + 1, opened_at=state.opened_at,
                           cooldown=state.cooldown, trial_in_flight=trial is not None)
        _save(schedule, new, trial_run_id=trial, actor="breaker",
              reason=f"run {run.pk} (admitted before the breaker opened) failed; it is not the test run", now=now)
    else:
        new = record_failure(state, breaker_settings(schedule), now)
        trial = None if new.status != BreakerStatus.HALF_OPEN else schedule.breaker_trial_run_id
        why = f"run {run.pk} failed ({new.failures} consecutive failures)"
        if state.status == BreakerStatus.HALF_OPEN:
            why = f"test run {run.pk} failed; cooldown now {int(new.cooldown.total_seconds())} s"
        _save(schedule, new, trial_run_id=trial, actor="breaker", reason=why, now=now)


def breaker_successes(*, schedule_ids: list[int]) -> None:
    """Successes of runs admitted while their breaker was closed: zero the count of each breaker that is
    still closed, in one statement; an open or half-open breaker is left alone (not their test run)."""
    Schedule.objects.filter(pk__in=schedule_ids, breaker_status=BreakerStatus.CLOSED, breaker_failures__gt=0).update(
        breaker_failures=0)


def breaker_trial_released(*, schedule_id: int, run_id: int, now: datetime) -> None:
    """The test run ended without a verdict (cancelled, skipped): let another trial in."""
    Schedule.objects.filter(pk=schedule_id, breaker_trial_run_id=run_id).update(breaker_trial_run_id=None)


def breaker_reset(*, schedule: Schedule, actor: Any, reason: str = "", now: datetime | None = None) -> None:
    """A person closes the breaker and zeroes the count: one audit entry, one signal."""
    now = now or timezone.now()
    with transaction.atomic():
        locked = _locked(schedule.pk)
        _save(locked, BreakerState(), trial_run_id=None, actor=actor, reason=(reason or "manual reset").strip(),
              now=now, action="breaker.reset")
    schedule.refresh_from_db()


def breaker_cooldowns(*, now: datetime) -> list[int]:
    """Governance: open breakers whose cooldown ended go half-open. Returns schedule ids."""
    moved = []
    for schedule in Schedule.objects.filter(breaker_status=BreakerStatus.OPEN).only(
        "id", "breaker_status", "breaker_failures", "breaker_opened_at", "breaker_current_cooldown_seconds",
        "breaker_trial_run", "breaker_cooldown_seconds", "breaker_max_cooldown_seconds", "breaker_threshold", "name",
    ):
        state = breaker_state(schedule)
        if not cooldown_over(state, now):
            continue
        with transaction.atomic():
            locked = _locked(schedule.pk)
            if locked.breaker_status != BreakerStatus.OPEN:
                continue
            new = BreakerState(status=BreakerStatus.HALF_OPEN, failures=state.failures, opened_at=state.opened_at,
                               cooldown=state.cooldown, trial_in_flight=False)
            _save(
                locked,
                new,
                trial_run_id=None,
                actor="governance",
                reason="cooldown over: next run is the test run",
                now=now,
            )
            moved.append(schedule.pk)
    return moved
