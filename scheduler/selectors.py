"""The read side: what pages, commands and the status API show."""
from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from scheduler.models import GovernanceTick, LoopLease, Run, RunStatus, WorkloadClass


def active_runs():
    return (
        Run.objects.filter(status=RunStatus.RUNNING)
        .select_related("schedule", "workload_class")
        .order_by("admitted_at")
    )


def queue_by_class() -> list[dict]:
    counts: dict[tuple[int, str], int] = {}
    for wc_id, status, n in (
        Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING])
        .values_list("workload_class_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        counts[(wc_id, status)] = n
    out = []
    for wc in WorkloadClass.objects.all():
        out.append({
            "name": wc.name,
            "limit": wc.concurrency_limit,
            "running": counts.get((wc.pk, RunStatus.RUNNING), 0),
            "queued": counts.get((wc.pk, RunStatus.QUEUED), 0),
            "waiting": counts.get((wc.pk, RunStatus.WAITING), 0),
        })
    return out


def last_tick() -> GovernanceTick | None:
    return GovernanceTick.objects.order_by("-started_at").first()


def governance_health(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    tick = last_tick()
    interval = settings.ETL_GOVERNANCE_INTERVAL
    if tick is None:
        return {"last_tick": None, "age_seconds": None, "late": True, "interval": interval}
    age = (now - tick.started_at).total_seconds()
    return {"last_tick": tick.started_at, "age_seconds": age, "late": age > 3 * interval, "interval": interval,
            "actions": tick.actions, "error": tick.error}


def leases(now: datetime | None = None) -> list[dict]:
    now = now or timezone.now()
    return [
        {"name": lease.name, "holder": lease.holder, "expires_at": lease.expires_at,
         "live": bool(lease.holder and lease.expires_at and lease.expires_at > now)}
        for lease in LoopLease.objects.order_by("name")
    ]


def status_snapshot(now: datetime | None = None) -> dict:
    now = now or timezone.now()
    health = governance_health(now)
    return {
        "now": now.isoformat(),
        "active_runs": [
            {"id": r.pk, "schedule": r.schedule.name, "target": r.schedule.target_id, "status": r.status,
             "worker": r.worker_id, "started_at": r.started_at.isoformat() if r.started_at else None,
             "heartbeat_at": r.heartbeat_at.isoformat() if r.heartbeat_at else None}
            for r in active_runs()
        ],
        "queue": queue_by_class(),
        "leases": [
            {**lease, "expires_at": lease["expires_at"].isoformat() if lease["expires_at"] else None}
            for lease in leases(now)
        ],
        "governance": {
            "last_tick": health["last_tick"].isoformat() if health["last_tick"] else None,
            "age_seconds": health["age_seconds"],
            "late": health["late"],
        },
        "runs_by_status": dict(Run.objects.values_list("status").annotate(n=Count("id")).order_by()),
    }
