"""The read side: what pages, commands and the status API show."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from statistics import median
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, Count, OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.sql import Query
from django.utils import timezone

from scheduler.models import (
    Backfill,
    BackfillWindow,
    GovernanceTick,
    LoopLease,
    Run,
    RunStatus,
    Schedule,
    WatermarkHistory,
    WatermarkState,
    WindowStatus,
    WorkloadClass,
)
from scheduler.services.history.tally import tally_totals
from scheduler.triggers.registry import get_trigger


@functools.cache
def _written(q: Q, model, vendor: str) -> str:
    query = Query(model)
    sql, params = query.build_where(q).as_sql(query.get_compiler(connection=connection), connection)
    editor = connection.schema_editor()
    return (sql % tuple(editor.quote_value(p) for p in params)).replace("%", "%%")


def as_written(q: Q, model=Run) -> RawSQL:
    """`q` (constants only) with its values written into the SQL, to filter by: a partial index whose condition
    is `q` is then used on SQLite too, which matches a LIKE only to the very term of the index's condition, never
    to a pattern sent as a parameter."""
    return RawSQL(_written(q, model, connection.vendor), (), output_field=BooleanField())


def owned_by(qs, team_ids, path: str = "schedule__owner_id"):
    """Narrow `qs` to objects whose schedule belongs to one of `team_ids` (None: every team)."""
    return qs if team_ids is None else qs.filter(**{f"{path}__in": list(team_ids)})


def active_runs(team_ids=None):
    return owned_by(
        Run.objects.filter(status=RunStatus.RUNNING)
        .select_related("schedule", "workload_class")
        .order_by("admitted_at"),
        team_ids,
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
        out.append(
            {
                "name": wc.name,
                "limit": wc.concurrency_limit,
                "running": counts.get((wc.pk, RunStatus.RUNNING), 0),
                "queued": counts.get((wc.pk, RunStatus.QUEUED), 0),
                "waiting": counts.get((wc.pk, RunStatus.WAITING), 0),
            }
        )
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
    return {
        "last_tick": tick.started_at,
        "age_seconds": age,
        "late": age > 3 * interval,
        "interval": interval,
        "actions": tick.actions,
        "error": tick.error,
    }


def leases(now: datetime | None = None) -> list[dict]:
    now = now or timezone.now()
    return [
        {
            "name": lease.name,
            "holder": lease.holder,
            "expires_at": lease.expires_at,
            "live": bool(lease.holder and lease.expires_at and lease.expires_at > now),
        }
        for lease in LoopLease.objects.order_by("name")
    ]


def status_snapshot(now: datetime | None = None, team_ids=None) -> dict:
    """`team_ids`: the teams whose active runs are listed (None: every team); the counts are of all."""
    now = now or timezone.now()
    health = governance_health(now)
    queue = queue_by_class()
    return {
        "now": now.isoformat(),
        "active_runs": [
            {
                "id": r.pk,
                "schedule": r.schedule.name,
                "target": r.schedule.target_id,
                "status": r.status,
                "worker": r.worker_id,
                "started_at": r.started_at.isoformat() if r.started_at else None,
                "heartbeat_at": r.heartbeat_at.isoformat() if r.heartbeat_at else None,
            }
            for r in active_runs(team_ids)
        ],
        "queue": queue,
        "leases": [
            {**lease, "expires_at": lease["expires_at"].isoformat() if lease["expires_at"] else None}
            for lease in leases(now)
        ],
        "governance": {
            "last_tick": health["last_tick"].isoformat() if health["last_tick"] else None,
            "age_seconds": health["age_seconds"],
            "late": health["late"],
        },
        # active statuses live, final ones from the counters kept as runs end: never a count of the ledger
        "runs_by_status": {**{key.upper(): sum(q[key] for q in queue) for key in ("queued", "waiting", "running")},
                           **tally_totals()},
    }


# --- schedules ---------------------------------------------------------------


def _latest_run_subquery(field: str):
    # run_sched_recent_idx (schedule, -id) makes this one index probe per schedule
    return Subquery(Run.objects.filter(schedule=OuterRef("pk")).order_by("-id").values(field)[:1])


def schedules_with_last_run(team_ids=None):
    return (
        owned_by(Schedule.objects.all(), team_ids, "owner_id").select_related("workload_class", "owner")
        .annotate(
            last_run_id=_latest_run_subquery("id"),
            last_run_status=_latest_run_subquery("status"),
            last_run_queued_at=_latest_run_subquery("queued_at"),
        )
        .order_by("name")
    )


def schedules_keyset_page(qs, *, after: str | None = None, before: str | None = None, size: int = 50) -> dict:
    """One page of `qs` (schedules) by name, the unique key the lists sort on: never a COUNT, never an OFFSET.

    `after` gives the page that follows that name, `before` the one that precedes it; `next` and `previous` are
    the cursors for the neighbouring pages (None at either end)."""
    if before is not None:
        rows = list(qs.filter(name__lt=before).order_by("-name")[: size + 1])
        has_previous, has_next = len(rows) > size, True
        rows = list(reversed(rows[:size]))
    else:
        if after is not None:
            qs = qs.filter(name__gt=after)
        rows = list(qs.order_by("name")[: size + 1])
        has_previous, has_next = after is not None, len(rows) > size
        rows = rows[:size]
    return {
        "schedules": rows,
        "next": rows[-1].name if rows and has_next else None,
        "previous": rows[0].name if rows and has_previous else None,
    }


def describe_trigger(schedule) -> str:
    try:
        return get_trigger(schedule.trigger_kind).describe(schedule.trigger_config or {}, timezone=schedule.timezone)
    except Exception:  # a plugin that was uninstalled or a config it no longer reads
        return f"{schedule.trigger_kind} (cannot describe this config)"


def next_fire_times(schedule, *, now: datetime, count: int = 3) -> list[dict]:
    """Next fires as local and UTC datetimes; empty for triggers that are not time based."""

    if not schedule.enabled:
        return []
    try:
        plugin = get_trigger(schedule.trigger_kind)
        fires = plugin.next_fires(schedule.trigger_config or {}, timezone=schedule.timezone, after=now, count=count)
        tz = ZoneInfo(schedule.timezone)
    except Exception:
        return []

    return [{"local": f.astimezone(tz), "utc": f.astimezone(UTC)} for f in fires]


def schedule_history(schedule, *, limit: int = 60) -> list[Run]:
    """The last finished runs, oldest first, for the duration / rows chart."""
    rows = list(
        Run.objects.filter(schedule=schedule, finished_at__isnull=False)
        .only("id", "status", "started_at", "finished_at", "rows_loaded", "queued_at")
        .order_by("-id")[:limit]
    )
    rows.reverse()
    return rows


def schedule_detail(schedule, *, now: datetime) -> dict:
    return {
        "schedule": schedule,
        "trigger_text": describe_trigger(schedule),
        "fires": next_fire_times(schedule, now=now, count=5),
        "history": schedule_history(schedule),
        "watermark": WatermarkState.objects.filter(schedule=schedule).first(),
        "watermark_history": list(WatermarkHistory.objects.filter(schedule=schedule).order_by("-at", "-id")[:20]),
        "upstream": list(schedule.depends_on.order_by("name")),
        "downstream": list(schedule.downstream.order_by("name")),
    }


def dependency_graph(team_ids: frozenset[int] | None = None) -> dict:
    """Every schedule (of `team_ids` when given), the edges among them and each schedule's latest run status."""

    schedules = list(
        owned_by(Schedule.objects.all(), team_ids, path="owner_id")
        .annotate(last_run_status=_latest_run_subquery("status"))
        .only("id", "name", "enabled", "target_id")
        .order_by("name")
    )
    shown = {s.pk for s in schedules}
    edges = [(down, up) for down, up in
             Schedule.depends_on.through.objects.values_list("from_schedule_id", "to_schedule_id")
             if down in shown and up in shown]
    return {"schedules": schedules, "edges": edges}


# --- backfills ---------------------------------------------------------------


def backfills_with_progress(team_ids=None):
    def count(*statuses):
        return Count("windows", filter=Q(windows__status__in=statuses))

    return (
        owned_by(Backfill.objects.all(), team_ids).select_related("schedule")
        .annotate(
            n_done=count(WindowStatus.SUCCEEDED),
            n_failed=count(WindowStatus.FAILED),
            n_running=count(WindowStatus.QUEUED, WindowStatus.RUNNING),
            n_cancelled=count(WindowStatus.CANCELLED),
        )
        .order_by("-id")
    )


def backfill_windows(backfill) -> list:
    return list(
        BackfillWindow.objects.filter(backfill=backfill)
        .only("id", "seq", "low", "high", "status", "attempts", "run_id", "backfill_id")
        .order_by("seq")
    )


def fold_runs(runs: list[Run], *, limit: int = 10) -> list[dict]:
    """Consecutive runs of one schedule with one status folded into one row (heartbeats stop flooding the list)."""
    groups: list[dict] = []
    for run in runs:
        last = groups[-1] if groups else None
        if last and last["run"].schedule_id == run.schedule_id and last["run"].shown_status == run.shown_status:
            last["more"] += 1
            continue
        if len(groups) == limit:
            break
        groups.append({"run": run, "more": 0})
    return groups


STRIP_LENGTH = 20


def recent_runs_by_schedule(schedule_ids, *, n: int = STRIP_LENGTH) -> dict[int, list[Run]]:
    """The last `n` finished runs of each schedule (backfills aside), oldest first, in two queries.

    First the id of each schedule's n-th latest finished run (a walk of n entries of run_sched_recent_idx), then
    the runs from there on, each schedule's its own index range: a window function over the schedules' runs
    numbered every run they ever had (5 s at 1.5M runs, issue 25)."""

    ids = list(schedule_ids)
    finished = Run.objects.filter(backfill__isnull=True, finished_at__isnull=False)
    nth = dict(Schedule.objects.filter(pk__in=ids).annotate(
        nth=Subquery(finished.filter(schedule=OuterRef("pk")).order_by("-id").values("id")[n - 1:n])
    ).values_list("pk", "nth"))
    if not nth:
        return {}
    since = Q()
    for schedule_id, first in nth.items():
        since |= Q(schedule_id=schedule_id, id__gte=first or 0)
    out: dict[int, list[Run]] = {}
    for run in (finished.filter(since).only("id", "schedule_id", "status", "started_at", "finished_at", "reason")
                .order_by("schedule_id", "id")):
        out.setdefault(run.schedule_id, []).append(run)
    return out


def typical_run_seconds(schedule: Schedule, *, last: int = 20) -> float | None:
    """The median duration of the schedule's last `last` successful runs (None: it has none yet)."""
    rows = (Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED, started_at__isnull=False,
                               finished_at__isnull=False)
            .order_by("-finished_at").values_list("started_at", "finished_at")[:last])
    durations = [max((end - start).total_seconds(), 0.0) for start, end in rows]
    return median(durations) if durations else None


def strip_summary(runs: list[Run]) -> dict:
    """Last success and typical (median) duration of successful runs among `runs`."""

    successes = [r for r in runs if r.status == RunStatus.SUCCEEDED]
    durations = [r.duration_seconds for r in successes if r.duration_seconds is not None]
    return {
        "strip": runs,
        "last_success": successes[-1] if successes else None,
        "typical_seconds": median(durations) if durations else None,
    }

