"""Run creation and the legal transitions of a run's life.

Every change is a compare-and-set on the status: zero rows changed means
another dispatcher, worker or person got there first, which is not an error.
"""
from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from scheduler import signals
from scheduler.models import Run, RunStatus, Schedule, TriggerKind
from scheduler.services.audit import audit_record
from scheduler.services.errors import ServiceError, check_json_depth, check_text

log = logging.getLogger(__name__)
S = RunStatus

LEGAL: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.WAITING, S.RUNNING, S.BLOCKED, S.SKIPPED, S.CANCELLED, S.FAILED}),
    S.WAITING: frozenset({S.QUEUED, S.RUNNING, S.BLOCKED, S.SKIPPED, S.CANCELLED, S.FAILED}),
    # RUNNING -> QUEUED: re-queued after a lost worker or a cluster stop
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.QUEUED, S.SKIPPED, S.CANCELLED}),
}


def is_legal(old: str, new: str) -> bool:
    return new in LEGAL.get(old, frozenset())


def run_transition(run: Run, *, new: str, now: datetime | None = None, extra_filter: dict | None = None, **fields: Any) -> bool:
    """CAS the run from its current status to `new`; update `run` in place on success."""
    old = run.status
    if not is_legal(old, new):
        raise ServiceError(f"a {old} run cannot become {new}", field="status")
    now = now or timezone.now()
    if new in RunStatus.final() and "finished_at" not in fields:
        fields["finished_at"] = now
    changed = Run.objects.filter(pk=run.pk, status=old, **(extra_filter or {})).update(status=new, **fields)
    if not changed:
        return False
    run.status = new
    for key, value in fields.items():
        setattr(run, key, value)
    _send_after_commit(run, new, old)
    return True


def _send_after_commit(run: Run, new: str, old: str) -> None:
    if new not in (S.SUCCEEDED, S.SKIPPED, S.FAILED, S.BLOCKED) and (new, old) != (S.QUEUED, S.RUNNING):
        return  # no signal for this transition (admission, waiting): spare the re-fetch after commit
    def send() -> None:
        # the in-memory run already holds the committed values: no re-fetch
        fresh = run
        # run_started is sent by the worker when it really starts (execution.py)
        if new in (S.SUCCEEDED, S.SKIPPED):
            signals.run_completed.send(sender=Run, run=fresh)
        elif new == S.FAILED:
            signals.run_failed.send(sender=Run, run=fresh, final=True)
        elif new == S.QUEUED and old == S.RUNNING:
            signals.run_failed.send(sender=Run, run=fresh, final=False)
        elif new == S.BLOCKED:
            signals.run_blocked.send(sender=Run, run=fresh)

    transaction.on_commit(send)


def validate_params(params: Any, *, field: str = "params") -> dict:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise ServiceError("must be a JSON object of key/value pairs", field=field)
    for key in params:
        if not isinstance(key, str) or not key:
            raise ServiceError("keys must be non-empty strings", field=field)
    check_json_depth(params, field=field)
    try:
        encoded = json.dumps(params, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ServiceError(f"is not JSON-serialisable ({exc})", field=field) from None
    if "\\u0000" in encoded:
        # PostgreSQL's jsonb cannot store NUL; refuse it here rather than fail with a 500 later
        raise ServiceError("must not contain NUL (\\u0000) characters", field=field)
    if len(encoded) > 256 * 1024:
        raise ServiceError("is larger than 256 KiB", field=field)
    return params


def run_build(
    *,
    schedule: Schedule,
    trigger_kind: str,
    trigger_key: str,
    params: dict | None = None,
    logical_time: datetime | None = None,
    triggered_by: str = "",
    status: str = S.QUEUED,
    reason: str = "",
    blocked_by: Schedule | None = None,
    event=None,
    backfill=None,
    window: tuple[str, str] | None = None,
    now: datetime,
) -> Run:
    """An unsaved run of `schedule` (for run_enqueue, and for bulk inserts by the dispatcher)."""
    merged = {**(schedule.params or {}), **(params or {})}
    run = Run(
        schedule=schedule,
        trigger_key=trigger_key[:200],
        trigger_kind=trigger_kind,
        logical_time=logical_time,
        params=merged,
        priority=schedule.priority,
        workload_class_id=schedule.workload_class_id,
        status=status,
        attempt=1,
        max_attempts=schedule.retry_max_attempts,
        queued_at=now,
        reason=reason[:500],
        blocked_by=blocked_by,
        triggered_by=triggered_by[:150],
        event=event,
        backfill=backfill,
        window_low=window[0] if window else "",
        window_high=window[1] if window else "",
    )
    if status in RunStatus.final():
        run.finished_at = now
    return run


def run_enqueue(
    *,
    schedule: Schedule,
    trigger_kind: str,
    trigger_key: str,
    params: dict | None = None,
    logical_time: datetime | None = None,
    triggered_by: str = "",
    status: str = S.QUEUED,
    reason: str = "",
    blocked_by: Schedule | None = None,
    event=None,
    backfill=None,
    window: tuple[str, str] | None = None,
    now: datetime | None = None,
) -> Run | None:
    """Create a run; None when a run with this trigger key already exists (a double fire)."""
    run = run_build(
        schedule=schedule, trigger_kind=trigger_kind, trigger_key=trigger_key, params=params,
        logical_time=logical_time, triggered_by=triggered_by, status=status, reason=reason, blocked_by=blocked_by,
        event=event, backfill=backfill, window=window, now=now or timezone.now(),
    )
    try:
        with transaction.atomic():
            run.save(force_insert=True)
    except IntegrityError:
        return None  # the unique (schedule, trigger_key) constraint: someone fired it already
    if status == S.BLOCKED:
        _send_after_commit(run, S.BLOCKED, S.QUEUED)
    return run


def run_trigger_manual(
    *, schedule: Schedule, actor: Any, params: dict | None = None, now: datetime | None = None, reason: str = ""
) -> Run:
    """A person or script asks for a run now, with override params."""
    params = validate_params(params)
    reason = check_text(reason, field="reason")
    if not schedule.enabled:
        raise ServiceError(f"schedule '{schedule.name}' is disabled; enable it first", field="schedule")
    now = now or timezone.now()
    from scheduler.services.audit import actor_name

    who, _kind = actor_name(actor)
    with transaction.atomic():
        run = run_enqueue(
            schedule=schedule,
            trigger_kind=TriggerKind.MANUAL,
            trigger_key=f"manual:{uuid.uuid4().hex}",
            params=params,
            logical_time=now,
            triggered_by=who,
            now=now,
        )
        assert run is not None  # a fresh uuid cannot collide
        audit_record(actor=actor, action="run.trigger", target=schedule, after={"run": run.pk, "params": params}, reason=reason)
    return run


def run_cancel(*, run: Run, actor: Any, reason: str = "", now: datetime | None = None) -> bool:
    """Cancel a run that is not final. A RUNNING run's worker finds out at its next CAS."""
    if run.is_final:
        raise ServiceError(f"run {run.pk} is already {run.status}", field="run")
    now = now or timezone.now()
    with transaction.atomic():
        before = run.status
        done = run_transition(run, new=S.CANCELLED, now=now, reason=(reason or "cancelled")[:500])
        if done:
            audit_record(actor=actor, action="run.cancel", target=run, before={"status": before},
                         after={"status": S.CANCELLED}, reason=reason)
            from scheduler.services.completion import on_run_final

            on_run_final(run, now=now)
    return done
