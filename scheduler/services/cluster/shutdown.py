"""A cluster's stop, as the database sees it: its runs go back to the queue without spending an attempt.

Every re-queue here is an end of kind SHUTDOWN written by the one end rule (runs/end.py), audited as
`run.requeue.shutdown`; a stop request of that kind goes through runs/stop.py, as a cancel's does. The process side
(when, and the kill of the process tree) is scheduler/cluster_stop.py's.
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from scheduler.core.ends import EndKind
from scheduler.models import Run, RunStatus
from scheduler.services.runs.end import Ending, run_end
from scheduler.services.runs.stop import run_stop_request

log = logging.getLogger(__name__)
S = RunStatus
STOPPED = "the cluster stopped"
REQUEUE_ACTION = "run.requeue.shutdown"


def release_unstarted(*, holder_prefix: list[str], now: datetime | None = None) -> int:
    """Runs this cluster's loops admitted that no worker began go back to the queue (their old message is stale:
    the token is cleared, so a worker's claim of it changes nothing)."""
    if not holder_prefix:
        return 0
    now = now or timezone.now()
    reason = f"{STOPPED} before a worker began it ({now:%H:%M:%S} UTC)"
    released = 0
    for run in Run.objects.filter(status=S.RUNNING, started_at__isnull=True, worker_id__in=holder_prefix):
        released += run_end(Ending(run=run, now=now, kind=EndKind.SHUTDOWN, reason=reason, actor="cluster",
                                   audit_action=REQUEUE_ACTION))
    return released


def runs_of_workers(worker_ids: set[str]) -> list[Run]:
    """The RUNNING runs that workers of these ids began (the cluster's own, while it stops)."""
    if not worker_ids:
        return []
    return list(Run.objects.filter(status=S.RUNNING, started_at__isnull=False, worker_id__in=sorted(worker_ids))
                .select_related("schedule"))


def runs_stop_for_shutdown(runs: list[Run], *, now: datetime | None = None) -> int:
    """The grace is over: each run is asked to stop as a cancel asks (its code is told; past ETL_CANCEL_GRACE_SECONDS
    it is killed), with the reason "the cluster stopped". Its worker then writes the end: back to the queue, the
    attempt not spent. Returns how many requests were written (a stronger request already there stands)."""
    now = now or timezone.now()
    return sum(run_stop_request(run=run, kind=EndKind.SHUTDOWN, reason=STOPPED, now=now, actor="cluster")
               for run in runs)


def runs_requeue_after_shutdown(runs: list[Run], *, now: datetime | None = None) -> int:
    """The cluster's processes are gone and these runs are still RUNNING (a worker ended by force, a sentinel that
    would not stop): the end their workers could not write, written here with their tokens. A person's cancel on
    the row stands (the table of ends); otherwise back to the queue, the attempt not spent."""
    now = now or timezone.now()
    done = 0
    for run in runs:
        run.refresh_from_db()
        if run.status != S.RUNNING:
            continue
        done += run_end(Ending(run=run, now=now, kind=EndKind.SHUTDOWN, reason=run.stop_reason or STOPPED,
                               token=run.dispatch_token, actor="cluster", audit_action=REQUEUE_ACTION))
    return done


__all__ = ["REQUEUE_ACTION", "STOPPED", "release_unstarted", "runs_of_workers", "runs_requeue_after_shutdown",
           "runs_stop_for_shutdown"]
