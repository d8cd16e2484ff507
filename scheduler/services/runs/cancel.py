"""A person cancels a run from a page, a shell or a script: the check, the cancel, and what came of it.

`run_cancel_as` is what the run page, `manage.py cancel_run` and
`SchedulerHost.cancel_run` call, so the three ask the same authorization
(`teams.authorize`, audited when refused) and tell the same outcomes apart.
The transition itself is `finish.run_cancel`'s: a run that has not begun ends
CANCELLED at once; a run whose code executes is asked to stop and stays
RUNNING (shown as STOPPING, holding its slot) until its work has ended.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from scheduler.models import Run, RunStatus
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.end import run_cancel
from scheduler.services.access.teams import authorize

CANCELLED = "cancelled"  # it had not begun: CANCELLED now
STOPPING = "stopping"  # its code was asked to stop (force: its process is being killed)
ALREADY_STOPPING = "already stopping"  # a stop was asked before; this request changed nothing

# what a caller re-reads to report the outcome (a stop request is written by a guarded UPDATE)
OUTCOME_FIELDS = ["status", "reason", "finished_at", "stop_requested_at", "stop_kind", "stop_reason", "exit_code"]


def run_cancel_as(*, run: Run, actor: Any, reason: str = "", force: bool = False,
                  now: datetime | None = None) -> str:
    """Cancel `run` as `actor` (who needs `scheduler.cancel_run` on its schedule); `force` kills it at once.

    Returns CANCELLED, STOPPING or ALREADY_STOPPING, with `run` re-read. Raises
    PermissionRefused when the actor may not, and ServiceError (field "run")
    when the run is final already or changed meanwhile into something that
    cannot be cancelled.
    """
    authorize(actor=actor, perm="scheduler.cancel_run", obj=run)
    done = run_cancel(run=run, actor=actor, reason=reason, now=now, force=force)
    run.refresh_from_db(fields=OUTCOME_FIELDS)
    if done:
        return CANCELLED if run.status == RunStatus.CANCELLED else STOPPING
    if run.stopping:
        # a stop was asked before (a cancel asked twice, or a kill of a run that a timeout or a fence stops)
        return ALREADY_STOPPING
    if run.is_final:
        raise ServiceError(f"run {run.pk} is already {run.status}", field="run")
    raise ServiceError(f"run {run.pk} changed meanwhile (now {run.status}); not cancelled, try again", field="run")
