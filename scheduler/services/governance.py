"""The governance loop's work: timeouts, lost workers, breaker cooldowns, orphans."""
from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from scheduler.models import GovernanceTick, Run, RunStatus
from scheduler.services.audit import audit_record
from scheduler.services.breakers import breaker_cooldowns
from scheduler.services.completion import on_run_final
from scheduler.services.execution import redispatch, requeue_or_fail_lost
from scheduler.services.runs import run_transition

log = logging.getLogger(__name__)
S = RunStatus


def dependency_timeouts(*, now: datetime) -> list[int]:
    failed = []
    waiting = Run.objects.filter(status=S.WAITING).select_related("schedule")
    for run in waiting:
        if now - run.queued_at <= timedelta(seconds=run.schedule.max_wait_seconds):
            continue
        with transaction.atomic():
            if run_transition(run, new=S.FAILED, now=now,
                              reason=f"dependency timeout: waited more than {run.schedule.max_wait_seconds} s ({run.reason})"[:500]):
                audit_record(actor="governance", action="run.dependency_timeout", target=run, after={"status": S.FAILED},
                             reason=run.reason, at=now)
                on_run_final(run, now=now)
                failed.append(run.pk)
    return failed


def stuck_runs(*, now: datetime, stuck_seconds: float | None = None) -> dict[str, list[int]]:
    """RUNNING runs without a heartbeat: lost workers are re-queued or failed; lost messages re-sent."""
    threshold = now - timedelta(seconds=stuck_seconds or settings.ETL_STUCK_SECONDS)
    out: dict[str, list[int]] = {"requeued": [], "failed": [], "redispatched": []}
    for run in Run.objects.filter(status=S.RUNNING, heartbeat_at__lt=threshold).select_related("schedule"):
        if run.started_at is None:
            # admitted but no worker ever claimed it: the broker lost the message
            if redispatch(run, now=now):
                out["redispatched"].append(run.pk)
                audit_record(actor="governance", action="run.redispatch", target=run, reason="no worker picked it up", at=now)
            continue
        outcome = requeue_or_fail_lost(run, now=now, why="worker lost: no heartbeat since "
                                       f"{run.heartbeat_at:%H:%M:%S} UTC")
        if outcome in ("requeued", "failed"):
            out[outcome].append(run.pk)
            audit_record(actor="governance", action=f"run.worker_lost.{outcome}", target=run,
                         reason=f"worker {run.worker_id} lost", at=now)
    return out


def governance_tick(*, now: datetime, holder: str) -> GovernanceTick:
    """One pass; every pass is stored with what it did, so a dead loop is visible."""
    tick = GovernanceTick.objects.create(started_at=now, holder=holder[:200])
    actions: dict = {}
    error = ""
    try:
        actions["dependency_timeouts"] = dependency_timeouts(now=now)
        actions.update(stuck_runs(now=now))
        actions["half_open"] = breaker_cooldowns(now=now)
        from scheduler.services import alerts

        actions["alerts"] = alerts.governance_alerts(now=now)
        actions["queue"] = {
            "queued": Run.objects.filter(status=S.QUEUED).count(),
            "waiting": Run.objects.filter(status=S.WAITING).count(),
            "running": Run.objects.filter(status=S.RUNNING).count(),
        }
    except Exception as exc:  # recorded, and the loop goes on next tick
        log.exception("governance tick failed")
        error = f"{type(exc).__name__}: {exc}"
    from django.utils import timezone

    GovernanceTick.objects.filter(pk=tick.pk).update(finished_at=timezone.now(), actions=actions, error=error)
    tick.actions, tick.error = actions, error
    return tick


__all__ = ["F", "dependency_timeouts", "governance_tick", "stuck_runs"]
