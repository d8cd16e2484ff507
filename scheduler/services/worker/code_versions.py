"""Which code a run runs, as its worker claims it; and a run whose target this worker's code does not know yet.

The worker computes the code version before its claim and writes it with the claim's own UPDATE (no statement
more per run): a pipeline's or workflow's from the registry (its module, digested as it was imported), a
command's from its program file, a dbt project's from its files (pipelines/code.py). A worker whose process does
not know the run's pipeline (a cluster still on older code while a newer one is rolled out) gives the run back to
the queue for another cluster, without spending an attempt, rather than failing it as unknown.
"""
from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta

from django.db import transaction

from scheduler.models import Run, RunStatus, TargetKind, requeue_fields
from scheduler.pipelines.code import CodeVersion, dbt_project_code, executable_code
from scheduler.pipelines.registry import get_target, is_registered
from scheduler.services.common.audit import audit_record
from scheduler.services.runs.breakers import breaker_trial_released
from scheduler.services.worker.commands import command_path

log = logging.getLogger(__name__)
S = RunStatus
HAND_BACK_DELAY = timedelta(seconds=2)  # a run handed back waits this long, so the same old worker does not spin on it


def run_code_version(run: Run) -> str | None:
    """The code version text the run records; None when this process does not know its pipeline or workflow.

    Finding it never fails the run: a program or project that cannot be read records '' (and the run goes on to
    fail or succeed on its own)."""
    schedule = run.schedule
    kind = schedule.target_kind
    if kind in (TargetKind.PIPELINE, TargetKind.WORKFLOW):
        if not schedule.target_id or not is_registered(kind, schedule.target_id):
            return None
        return get_target(kind, schedule.target_id).code.text
    try:
        return target_code(kind, command=schedule.command, dbt=schedule.dbt).text
    except Exception:  # a record of the code must never stop the code
        log.warning("run %s: could not read its code version", run.pk, exc_info=True)
        return ""


def run_code_or_hand_back(run: Run | None, *, token: str, now: datetime, cluster: str) -> str | None:
    """The code version a worker claims `run` with; None when there is no run to claim (gone, or handed back
    because this worker's code does not know its target)."""
    if run is None:
        return None
    code = run_code_version(run)
    if code is None:
        run_hand_back(run=run, token=token, now=now, cluster=cluster)
    return code


def target_code(kind: str, *, command: dict | None = None, dbt: dict | None = None) -> CodeVersion:
    """A command's program (when it is a file) or a dbt project's files; empty for a shell string."""
    if kind == TargetKind.COMMAND and command and command.get("argv"):
        env = command.get("env") or {}
        return executable_code(command["argv"][0], path=command_path(env.get("PATH")), cwd=command.get("cwd"))
    if kind == TargetKind.DBT and dbt and dbt.get("project_dir") and os.path.isdir(dbt["project_dir"]):
        return dbt_project_code(dbt["project_dir"])
    return CodeVersion()


def code_before(run: Run, *, look_back: int = 50) -> dict | None:
    """The code the schedule's run before this one ran, for "code changed since run #N": {"run", "code_version",
    "changed"}; None when this run recorded none or none of the `look_back` runs before it did (a bounded read of
    the schedule's recent runs, whatever the history's depth)."""
    if not run.code_version:
        return None
    older = (Run.objects.filter(schedule_id=run.schedule_id, pk__lt=run.pk).order_by("-pk")
             .values_list("pk", "code_version")[:look_back])
    for pk, code in older:
        if code:
            return {"run": pk, "code_version": code, "changed": code != run.code_version}
    return None


def run_hand_back(*, run: Run, token: str, now: datetime, cluster: str) -> bool:
    """The run's target is unknown to this worker's code: back to the queue, unclaimed, its attempt not spent
    (compare-and-set on the message's token, before any claim: a run claimed or changed meanwhile is left)."""
    kind, target = run.schedule.target_kind, run.schedule.target_id
    reason = f"cluster {cluster} does not know {kind} {target} yet (older code): back to the queue for another"
    with transaction.atomic():
        unclaimed = Run.objects.filter(pk=run.pk, status=S.RUNNING, dispatch_token=token, started_at__isnull=True)
        changed = unclaimed.update(**requeue_fields(reason=reason, not_before=now + HAND_BACK_DELAY))
        if changed:
            # an admission as the breaker's test run must not keep the breaker's trial slot taken
            breaker_trial_released(schedule_id=run.schedule_id, run_id=run.pk, now=now)
            audit_record(actor="worker", action="run.handed_back", target=run, before={"status": S.RUNNING},
                         after={"status": S.QUEUED, "worker": cluster}, reason=reason, at=now)
    if changed:
        log.warning("run %s: this cluster does not know %s %s yet; handed back to the queue", run.pk, kind, target)
    return bool(changed)


__all__ = [
    "HAND_BACK_DELAY",
    "code_before",
    "run_code_or_hand_back",
    "run_code_version",
    "run_hand_back",
    "target_code",
]
