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

from scheduler.core import ConfigError
from scheduler.core.userdata import check_no_templates, check_numbers
from scheduler.models import Run, RunStatus, Schedule, TargetKind, TriggerKind
from scheduler.pipelines.params import check_params
from scheduler.pipelines.registry import get_target, is_registered
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import Conflict, NotFound, ServiceError, check_json_depth, check_text
from scheduler.core.userdata import check_surrogates

log = logging.getLogger(__name__)
S = RunStatus

# The moves of a run that are not its end. Every final status (and a lost
# run's re-queue) belongs to scheduler/services/runs/end.py.
LEGAL: dict[str, frozenset[str]] = {
    S.QUEUED: frozenset({S.WAITING, S.RUNNING}),
    S.WAITING: frozenset({S.QUEUED, S.RUNNING}),
}


def is_legal(old: str, new: str) -> bool:
    return new in LEGAL.get(old, frozenset())


def run_transition(
    run: Run, *, new: str, now: datetime | None = None, extra_filter: dict | None = None, **fields: Any
) -> bool:
    """CAS the run from its current status to a non-final `new` (wait, release, admit); update `run` in place."""
    old = run.status
    if not is_legal(old, new):
        hint = " (final transitions go through scheduler.services.runs.end)" if new in RunStatus.final() else ""
        raise ServiceError(f"a {old} run cannot become {new}{hint}", field="status")
    changed = Run.objects.filter(pk=run.pk, status=old, **(extra_filter or {})).update(status=new, **fields)
    if not changed:
        return False
    run.status = new
    for key, value in fields.items():
        setattr(run, key, value)
    return True


def with_schedules(runs: list[Run]) -> list[Run]:
    """Attach each run's schedule, read once per schedule (not one joined copy per run row)."""
    schedules = Schedule.objects.in_bulk({run.schedule_id for run in runs})
    for run in runs:
        run.schedule = schedules[run.schedule_id]
    return runs


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
        check_numbers(params, field=field)
    except ConfigError as exc:
        raise ServiceError(exc.problem, field=exc.field) from None
    try:
        encoded = json.dumps(params, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ServiceError(f"is not JSON-serialisable ({exc})", field=field) from None
    if "\\u0000" in encoded:
        # PostgreSQL's jsonb cannot store NUL; refuse it here rather than fail with a 500 later
        raise ServiceError("must not contain NUL (\\u0000) characters", field=field)
    if "\\ud" in encoded:  # a surrogate, paired (a character past U+FFFF) or lone (no character: refused)
        try:
            check_surrogates(params, field=field)
        except ConfigError as exc:
            raise ServiceError(exc.problem, field=exc.field) from None
    if len(encoded) > 256 * 1024:
        raise ServiceError("is larger than 256 KiB", field=field)
    return params


def check_target_params(schedule: Schedule, params: dict, *, field: str = "params") -> dict:
    """`params` when they fit the declared params schema of the schedule's pipeline or workflow.

    Run params are data: every door that takes params (run now, trigger, API, facade, events, webhooks,
    re-runs, backfills, the schedule's own params) asks this, and an unknown key or a wrong type is refused
    naming the key. A dbt run's params become dbt vars, which dbt renders as Jinja: a string holding a
    template opener is refused there (docs/security.md, "Params stay data at dbt's door").
    """
    kind, target = schedule.target_kind, schedule.target_id
    if kind == TargetKind.DBT:
        try:
            check_no_templates(params or {}, field=field)
        except ConfigError as exc:
            raise ServiceError(exc.problem, field=exc.field) from None
        return params
    if kind not in (TargetKind.PIPELINE, TargetKind.WORKFLOW) or not target or not is_registered(kind, target):
        return params  # a command's params are its ETL_PARAMS; an unknown target is refused elsewhere
    try:
        check_params(get_target(kind, target).params, params or {}, field=field)
    except ConfigError as exc:
        raise ServiceError(exc.problem, field=exc.field) from None
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
    """An unsaved run of `schedule` (for run_enqueue, bulk inserts, and finish.run_refused)."""
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
    """Create a run; None when a run with this trigger key already exists (a double fire).

    A run born final (a refused trigger) is finish.run_refused's job.
    """
    if status in RunStatus.final():
        raise ServiceError(f"a new run cannot start {status}; use finish.run_refused", field="status")
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
    return run


def run_trigger_manual(
    *, schedule: Schedule, actor: Any, params: dict | None = None, now: datetime | None = None, reason: str = ""
) -> Run:
    """A person or script asks for a run now, with override params."""
    params = check_target_params(schedule, validate_params(params))
    reason = check_text(reason, field="reason")
    if not schedule.enabled:
        raise Conflict(f"schedule '{schedule.name}' is disabled; enable it first", field="schedule")
    now = now or timezone.now()
    who, _kind = actor_name(actor)
    run = run_build(
        schedule=schedule, trigger_kind=TriggerKind.MANUAL, trigger_key=f"manual:{uuid.uuid4().hex}", params=params,
        logical_time=now, triggered_by=who, now=now,
    )
    with transaction.atomic():
        # a fresh uuid cannot collide: the insert needs no savepoint of its own (run_enqueue's, for a double fire)
        run.save(force_insert=True)
        audit_record(
            actor=actor, action="run.trigger", target=schedule, after={"run": run.pk, "params": params}, reason=reason
        )
    return run


def schedule_get(name_or_id: Any) -> Schedule:
    qs = Schedule.objects.select_related("workload_class")
    found = None
    if isinstance(name_or_id, Schedule):
        return name_or_id
    if isinstance(name_or_id, int) or (isinstance(name_or_id, str) and name_or_id.isdigit()):
        found = qs.filter(pk=int(name_or_id)).first()
    if isinstance(name_or_id, str):
        check_text(name_or_id, field="schedule")  # NUL or a lone surrogate: no name holds one, SQLite cannot look
    if found is None and isinstance(name_or_id, str):
        found = qs.filter(name=name_or_id).first()
    if found is None:
        raise NotFound(f"unknown schedule '{name_or_id}'", field="schedule")
    return found
