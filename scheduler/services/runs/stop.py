"""Stopping a run: a cancel (a person's, or an overlap policy's), a forced stop, a timeout, a cluster's shutdown.

A run that has not begun ends at once (runs/end.py writes it). A run whose code executes is asked to stop: its row
gets a stop request (`stop_kind`), which a stronger request may replace (`core.ends.WINS`: a person's cancel
replaces a pending timeout, a forced stop replaces a cancel). It shows as STOPPING, keeps its class slot and its
schedule's turn, and ends when its worker reports that the work has ended (or, past the grace, killed it).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.core.ends import EndKind, Next, plan, replaceable_by
from scheduler.models import Run, RunStatus, StopKind
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.common.errors import Conflict, ServiceError
from scheduler.services.runs.end import Ending, run_end
from scheduler.services.runs.logs import run_log_append
from scheduler.services.runs.transitions import set_fields

S = RunStatus
CANCELS = (EndKind.CANCEL, EndKind.CANCEL_OTHER, EndKind.TERMINATE)


def run_cancel(*, run: Run, actor: Any, reason: str = "", now: datetime | None = None, force: bool = False,
               kind: str = EndKind.CANCEL) -> bool:
    """Cancel a run that is not final (`kind`: a person's cancel, or an overlap policy's `cancel_other`); False
    when someone else changed it first.

    A run that has not begun (queued, waiting, admitted but not claimed by a worker) is CANCELLED at once. A run
    whose code is executing is asked to stop instead. `force` (terminate) kills it at once, without the grace;
    asking again with `force` escalates a pending cancel.
    """
    if run.is_final:
        raise Conflict(f"run {run.pk} is already {run.status}", field="run")
    kind = EndKind.TERMINATE if force else EndKind(kind)
    if kind not in CANCELS:
        raise ServiceError(f"{kind} is not a kind of cancel", field="kind")
    now = now or timezone.now()
    reason = reason or "cancelled"
    with transaction.atomic():
        # not claimed by a worker yet: no code runs, so it ends now (a worker's claim needs started_at empty)
        if run.status != S.RUNNING or run.started_at is None:
            done = run_end(Ending(run=run, kind=kind, now=now, reason=reason, actor=actor, audit_action="run.cancel"))
            if done:
                _cancel_note(run, actor=actor, reason=reason, now=now)
                return True
            if run.status != S.RUNNING:
                return False
            run.refresh_from_db(fields=["status", "started_at", "stop_kind", "stop_requested_at", "dispatch_token"])
            if run.status != S.RUNNING:
                return False
        return run_stop_request(run=run, kind=kind, reason=reason, now=now, actor=actor)


def _cancel_note(run: Run, *, actor: Any, reason: str, now: datetime) -> None:
    """The last line of a run cancelled before a worker began it: without it, a run re-queued after a failed
    attempt would end its log with that attempt's error and "re-queued (attempt N/M)"."""
    who, _kind = actor_name(actor)
    when = "it began" if run.attempt <= 1 else f"attempt {run.attempt} of {run.max_attempts} began"
    run_log_append(run_id=run.pk, message=f"cancelled by {who} before {when}: {reason}"[:2000], at=now)


def run_stop_request(*, run: Run, kind: str, reason: str, now: datetime, actor: Any = "system") -> bool:
    """Ask a RUNNING run's code to stop: a compare-and-set on RUNNING and a pending request this one outranks.

    Its worker reads the request within a second. The run stays RUNNING (shown as STOPPING) until its end is
    written (runs/end.py): the end of the strongest request asked, whatever the worker saw first.
    """
    if kind not in StopKind.values:
        raise ServiceError(f"unknown stop kind {kind!r}", field="kind")
    with transaction.atomic():
        changed = Run.objects.filter(pk=run.pk, status=S.RUNNING, stop_kind__in=replaceable_by(kind)).update(
            stop_requested_at=now, stop_kind=kind, stop_reason=reason[:300])
        if not changed:
            return False
        before = "STOPPING" if run.stop_kind else S.RUNNING
        set_fields(run, stop_requested_at=now, stop_kind=kind, stop_reason=reason[:300])
        audit_record(actor=actor, action=f"run.stop.{kind}", target=run, before={"status": before},
                     after={"status": "STOPPING", "stop": kind}, reason=reason[:500], at=now)
    return True


def stop_outcome(*, kind: str, reason: str, attempts_left: bool = False) -> tuple[str, str]:
    """(final status, reason) of a run whose code stops on a request of `kind`, as pages announce it: a cancel is
    CANCELLED, a timeout FAILED (QUEUED again while attempts last), a cluster's stop QUEUED."""
    the_plan = plan(kind, attempts_left=attempts_left)
    status = the_plan.status if the_plan.next == Next.FINAL else S.QUEUED
    default = {EndKind.TIMEOUT: "timed out", EndKind.SHUTDOWN: "the cluster stopped",
               EndKind.FENCE: "fenced: its worker lost the database"}.get(kind, "cancelled")
    return status, reason or default


__all__ = ["CANCELS", "run_cancel", "run_stop_request", "stop_outcome"]
