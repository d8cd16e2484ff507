"""The governance loop's work: timeouts, lost workers, breaker cooldowns, missed deadlines, orphans, and the
deletes that waited for their schedule's runs to stop (definitions/schedule_removal.py).

One loop across all clusters holds the `governance` lease (scheduler/loops.py)
and calls `governance_tick` every ETL_GOVERNANCE_INTERVAL. Each job is its own
function taking `now`, so tests drive it with injected time; each tick is
stored with what it did, so a dead loop shows on the pages and in an alert.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.models import GovernanceTick, Run, RunStatus, TargetKind
from scheduler.services.oversight import alerts
from scheduler.services.common.audit import audit_record
from scheduler.services.history.audit_counts import audit_counts_fold
from scheduler.services.runs.breakers import breaker_cooldowns
from scheduler.services.oversight.deadlines import deadlines_check
from scheduler.services.admission.dispatch import run_redispatch
from scheduler.services.runs.end import run_finish
from scheduler.services.runs.lost import run_stop_settled, runs_lost
from scheduler.services.oversight.freshness import freshness_check
from scheduler.services.history.hour_counts import hour_counts_fold
from scheduler.services.history.tally import tally_fold
from scheduler.services.runs.waiting import waiting_in_turns
from scheduler.services.admission.webhooks import webhook_prune
from scheduler.services.definitions.schedule_removal import schedules_deleting_finish

log = logging.getLogger(__name__)
S = RunStatus


def dependency_timeouts(*, now: datetime) -> list[int]:
    """WAITING runs that waited longer than their schedule's max_wait_seconds fail."""
    failed = []
    for run in waiting_in_turns(waited_past_max_at=now):
        reason = f"dependency timeout: waited more than {run.schedule.max_wait_seconds} s ({run.reason})"[:500]
        if run_finish(run=run, status=S.FAILED, now=now, reason=reason, actor="governance",
                      audit_action="run.dependency_timeout"):
            failed.append(run.pk)
    return failed


def stuck_runs(*, now: datetime, stuck_seconds: float | None = None) -> dict[str, list[int]]:
    """RUNNING runs without a heartbeat: lost workers are re-queued or failed; lost messages re-sent.

    A run admitted by the gate but never claimed by a worker (started_at is
    empty) lost its broker message: it is sent again with a new token, so the
    old message, should it still arrive, is ignored as stale.
    """
    threshold = now - timedelta(seconds=stuck_seconds or settings.ETL_STUCK_SECONDS)
    out: dict[str, list[int]] = {"requeued": [], "failed": [], "redispatched": []}
    # prefetch, not a join: a dead cluster's 1,000 runs belong to far fewer schedules, loaded once each;
    # a lost run's report, error and params are not read here (a workflow's report can be large)
    lost = list(Run.objects.filter(status=S.RUNNING, heartbeat_at__lt=threshold).prefetch_related("schedule")
                .defer("report", "error", "params").order_by("id")[:1000])
    if not lost:
        return out
    # One transaction per tick, not per run: when a whole cluster died, a commit
    # per lost run was most of the tick (bench scenario 8). Every change inside
    # is still a compare-and-set, so a concurrent worker or person wins cleanly.
    with transaction.atomic():
        for run in lost:
            if run.started_at is None and run_redispatch(run, now=now):
                out["redispatched"].append(run.pk)
                audit_record(actor="governance", action="run.redispatch", target=run,
                             reason="admitted but no worker picked it up: message sent again", at=now)
        # a run asked to stop whose worker fell silent has stopped (its worker ended it, or died): the stop's
        # outcome, never a re-queue of a run a person cancelled
        stopping = [run for run in lost if run.started_at is not None and run.stop_requested_at is not None]
        for run in stopping:
            if run_stop_settled(run=run, now=now, why=f"{_silent(run)}; the run had been asked to stop"):
                out.setdefault("stopped", []).append(run.pk)
        out.update(runs_lost(runs=[run for run in lost if run.started_at is not None and run.stop_requested_at is None],
                             now=now))
    return out


def _silent(run: Run) -> str:
    beat = f"{run.heartbeat_at:%H:%M:%S} UTC" if run.heartbeat_at else "its start"
    return f"no heartbeat from {run.worker_id or 'its worker'} since {beat}"


def stopped_runs_of_dead_workers(*, now: datetime, host: str, alive: Callable[[int], bool],
                                 kill: Callable[[int], list[int]] | None = None) -> list[int]:
    """Runs of this machine whose worker process has ended while they were RUNNING (each cluster's reaper calls it).

    Whatever of a command such a run left behind is killed at once (`kill`), so nothing of it goes on writing
    while governance re-queues the run. A run that had been asked to stop (the supervisor ended its process past
    the grace, or it died) gets the stop's outcome now, not after ETL_STUCK_SECONDS; the others stay governance's.
    """
    marker = f"@{host}:"
    settled = []
    for run in (Run.objects.filter(status=S.RUNNING, started_at__isnull=False, worker_id__contains=marker)
                .select_related("schedule").defer("report", "error", "params").order_by("id")[:1000]):
        pid = run.worker_id.rsplit(":", 1)[-1]
        if not pid.isdigit() or alive(int(pid)):
            continue
        if kill is not None and run.schedule.target_kind in (TargetKind.COMMAND, TargetKind.DBT):
            left = kill(run.pk)
            if left:
                log.warning("killed %d process(es) of run %s, whose worker %s has died", len(left), run.pk, pid)
        if run.stop_requested_at is None:
            continue
        if run_stop_settled(run=run, now=now, why=f"its worker process {pid} has ended; the run had been asked to stop",
                            actor="reaper"):
            settled.append(run.pk)
    return settled


def prune(*, now: datetime) -> dict[str, int]:
    """Old webhook signatures (past any replay window); old ticks go with the rest of the history (retention.py)."""
    return {"webhook_deliveries": webhook_prune(now=now)}


def _jobs() -> list[tuple[str, Callable[..., object]]]:
    return [
        ("dependency_timeouts", dependency_timeouts),
        ("stuck", stuck_runs),
        ("half_open", breaker_cooldowns),
        ("alerts_resent", alerts.governance_alerts),
        ("freshness", freshness_check),
        ("deadlines_missed", deadlines_check),
        ("pruned", prune),
        ("schedules_deleted", schedules_deleting_finish),
        ("tally_folded", tally_fold),
        ("hour_counts_folded", hour_counts_fold),
        ("audit_counts_folded", audit_counts_fold),
    ]


def governance_tick(*, now: datetime, holder: str) -> GovernanceTick:
    """One pass; every pass is stored with what it did, so a dead loop is visible.

    Each job runs on its own: one that fails (recorded in `error`) does not
    stop the others, and the loop goes on next tick.
    """
    tick = GovernanceTick.objects.create(started_at=now, holder=holder[:200])
    actions: dict = {}
    errors: list[str] = []
    for name, job in _jobs():
        try:
            result = job(now=now)
        except Exception as exc:
            log.exception("governance job %s failed", name)
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if name == "stuck":
            actions.update(result)
        else:
            actions[name] = result
    actions["queue"] = {
        "queued": Run.objects.filter(status=S.QUEUED).count(),
        "waiting": Run.objects.filter(status=S.WAITING).count(),
        "running": Run.objects.filter(status=S.RUNNING).count(),
    }
    error = "\n".join(errors)
    GovernanceTick.objects.filter(pk=tick.pk).update(finished_at=timezone.now(), actions=actions, error=error)
    tick.actions, tick.error = actions, error
    return tick


__all__ = ["dependency_timeouts", "governance_tick", "prune", "stopped_runs_of_dead_workers", "stuck_runs"]
