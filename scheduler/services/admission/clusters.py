"""The running clusters as they announce themselves: the code each runs, the targets it knows, reload requests.

Each `qcluster` writes its `Cluster` row as it starts and beats it every ETL_CODE_CHECK_SECONDS (rollout.py);
a row not beaten for LIVE_BEATS of those is a cluster gone. The dispatcher asks `unknown_target_reason` before it
admits a run: a pipeline or workflow that neither it nor any live cluster knows (new code not rolled out yet)
keeps its run QUEUED with that reason, for ETL_UNKNOWN_TARGET_SECONDS, instead of a worker failing it at once.
"""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduler.models import Cluster, Run, RunStatus, TargetKind
from scheduler.pipelines.registry import is_registered
from scheduler.services.common.audit import audit_record
from scheduler.services.common.errors import ServiceError, check_text
from scheduler.services.runs.end import run_finish

LIVE_BEATS = 3  # beats a cluster may miss before it counts as gone (a slow beat is not a dead cluster)
FORGET_AFTER = timedelta(days=1)  # rows of clusters gone (killed, never said goodbye) kept this long for the record
UNKNOWN_PREFIX = "no cluster knows"
_KNOWN_CACHE: dict[str, Any] = {"at": -1e9, "targets": frozenset()}
_cache_lock = threading.Lock()


def target_key(kind: str, target_id: str) -> str:
    return f"{kind}:{target_id}"


def live_since(now: datetime) -> datetime:
    return now - timedelta(seconds=LIVE_BEATS * settings.ETL_CODE_CHECK_SECONDS)


# --- a cluster's own row -----------------------------------------------------------------------------

def cluster_join(*, holder: str, name: str, host: str, pid: int, code: dict, code_version: str,
                 targets: list[str], problems: list[str], now: datetime) -> Cluster:
    """A cluster starts: its row (the rows of clusters long gone are dropped on the way)."""
    with transaction.atomic():
        Cluster.objects.filter(seen_at__lt=now - FORGET_AFTER).delete()
        return Cluster.objects.create(holder=holder[:200], name=name[:100], host=host[:200], pid=pid, started_at=now,
                                      seen_at=now, code=code, code_version=code_version[:500], targets=targets,
                                      problems=problems)


def cluster_beat(*, holder: str, now: datetime) -> Cluster | None:
    """The cluster is alive: its row, with any reload request on it (None when the row is gone: written again by
    the caller)."""
    if not Cluster.objects.filter(pk=holder).update(seen_at=now):
        return None
    return Cluster.objects.filter(pk=holder).only("reload_requested_at", "reload_reason").first()


def cluster_draining(*, holder: str, now: datetime, why: str) -> None:
    """The cluster finishes its running runs before it restarts: the overview says so, with why."""
    Cluster.objects.filter(pk=holder).update(draining_since=now, reload_reason=why[:300])


def cluster_leave(*, holder: str) -> None:
    Cluster.objects.filter(pk=holder).delete()


def cluster_restarted(*, holder: str, name: str, why: str, before: str, after: str, now: datetime) -> None:
    """The audit entry of a cluster that restarts its workers for new code (or because it was asked)."""
    audit_record(actor="cluster", action="cluster.restart", target=("cluster", name),
                 before={"code_version": before}, after={"code_version": after, "holder": holder}, reason=why, at=now)


# --- reading them ------------------------------------------------------------------------------------

def clusters_live(*, now: datetime) -> list[Cluster]:
    """The clusters that beat recently, by name."""
    return list(Cluster.objects.filter(seen_at__gte=live_since(now)).defer("targets"))


def clusters_context(now: datetime) -> dict:
    """What the overview shows of the clusters: each with its code, and whether they disagree (one read)."""
    clusters = clusters_live(now=now)
    versions = sorted({c.code_version for c in clusters})
    return {"clusters": clusters, "code_versions": versions, "clusters_disagree": len(versions) > 1,
            "cluster_window": LIVE_BEATS * settings.ETL_CODE_CHECK_SECONDS}


def clusters_reload(*, actor: Any, now: datetime | None = None, name: str | None = None,
                    reason: str = "") -> list[Cluster]:
    """Ask the live clusters (or those named `name`) to finish their running runs and restart their workers;
    each notices at its next beat. One audit entry per cluster asked."""
    now = now or timezone.now()
    reason = check_text(reason or "", field="reason", max_length=300)
    clusters = Cluster.objects.filter(seen_at__gte=live_since(now))
    if name:
        name = check_text(name, field="cluster", max_length=100)
        clusters = clusters.filter(name=name)
    with transaction.atomic():
        asked = list(clusters)
        if name and not asked:
            raise ServiceError(f"no running cluster is named {name!r}", field="cluster")
        for cluster in asked:
            Cluster.objects.filter(pk=cluster.pk).update(reload_requested_at=now, reload_reason=reason or "asked")
            audit_record(actor=actor, action="cluster.reload", target=("cluster", cluster.name),
                         after={"holder": cluster.holder, "code_version": cluster.code_version},
                         reason=reason, at=now)
    return asked


# --- the targets no cluster knows yet ---------------------------------------------------------------

def known_targets(*, now: datetime) -> frozenset[str]:
    """The targets the live clusters know, read at most once per ETL_CODE_CHECK_SECONDS in a process."""
    with _cache_lock:
        if time.monotonic() - _KNOWN_CACHE["at"] < settings.ETL_CODE_CHECK_SECONDS:
            return _KNOWN_CACHE["targets"]
    found: set[str] = set()
    for targets in Cluster.objects.filter(seen_at__gte=live_since(now)).values_list("targets", flat=True):
        found.update(targets or ())
    with _cache_lock:
        _KNOWN_CACHE.update(at=time.monotonic(), targets=frozenset(found))
    return frozenset(found)


def forget_known_targets() -> None:
    """Read the clusters again at the next question (tests; a cluster that just joined)."""
    with _cache_lock:
        _KNOWN_CACHE["at"] = -1e9


def unknown_target_reason(run: Run, *, now: datetime) -> str:
    """'' when this process or a live cluster knows the run's pipeline or workflow, else why it waits.

    This process's registry first (memory only: the common case costs no statement); the clusters' rows only for
    a target it does not know.
    """
    kind, target = run.schedule.target_kind, run.schedule.target_id
    if kind not in (TargetKind.PIPELINE, TargetKind.WORKFLOW) or not target or is_registered(kind, target):
        return ""
    if target_key(kind, target) in known_targets(now=now):
        return ""
    return f"{UNKNOWN_PREFIX} {kind} {target} yet"


def unknown_target_deadline(run: Run) -> datetime:
    """When a run whose target no cluster knows stops waiting for one and fails."""
    return run.queued_at + timedelta(seconds=settings.ETL_UNKNOWN_TARGET_SECONDS)


def run_wait_for_code(*, run: Run, why: str, now: datetime) -> None:
    """No running cluster knows the run's pipeline yet (new code not rolled out): it stays QUEUED saying so, and
    fails with that reason once ETL_UNKNOWN_TARGET_SECONDS have passed since it was queued; never at once."""
    if now >= unknown_target_deadline(run):
        waited = f"{settings.ETL_UNKNOWN_TARGET_SECONDS:g} s"
        run_finish(run=run, status=RunStatus.FAILED, now=now,
                   reason=f"{why} (waited {waited} for a cluster that does)")
    elif run.reason != why and Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(reason=why):
        run.reason = why  # written once; the ticks after read it and change nothing


def is_unknown_target_reason(reason: str) -> bool:
    """A reason written by `unknown_target_reason` or by a worker that handed its run back (code_versions.py)."""
    return reason.startswith(UNKNOWN_PREFIX) or " does not know " in reason


__all__ = [
    "LIVE_BEATS", "UNKNOWN_PREFIX", "cluster_beat", "cluster_draining", "cluster_join", "cluster_leave",
    "cluster_restarted", "clusters_context", "clusters_live", "clusters_reload",
    "forget_known_targets", "is_unknown_target_reason", "known_targets", "live_since", "run_wait_for_code",
    "target_key", "unknown_target_deadline", "unknown_target_reason",
]
