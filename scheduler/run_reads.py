"""The read side of the runs list and of one run: the list's keyset pages, a run's upstreams, its log lines."""

from __future__ import annotations

from datetime import UTC

from django.db.models.functions import Coalesce

from scheduler import timeline
from scheduler.core.userdata import terminal_safe
from scheduler.models import NodeRecord, Run, RunLogLine, RunStatus, RunUpstream
from scheduler.selectors import owned_by
from scheduler.services.runs.dependencies import verdict_for

# --- runs list: keyset pagination -------------------------------------------

RUN_LIST_FIELDS = (
    "id",
    "status",
    "trigger_kind",
    "queued_at",
    "started_at",
    "finished_at",
    "rows_loaded",
    "reason",
    "attempt",
    "stop_requested_at",  # a RUNNING run asked to stop shows as STOPPING
    "stop_kind",  # a pending cancel offers Kill now
    "schedule__id",
    "schedule__name",
    "schedule__owner_id",  # whether the viewer may cancel it, without a query per row
    "schedule__target_id",
    "workload_class__id",
    "workload_class__name",
)


def run_filters_apply(qs, filters: dict):
    """Narrow a Run queryset by already-cleaned filters (see views.forms.RunFilterForm)."""
    if filters.get("status"):
        qs = qs.filter(status=filters["status"])
    if filters.get("schedule"):
        qs = qs.filter(schedule=filters["schedule"])
    if filters.get("workload_class"):
        qs = qs.filter(workload_class=filters["workload_class"])
    if filters.get("trigger_kind"):
        qs = qs.filter(trigger_kind=filters["trigger_kind"])
    if filters.get("since"):
        qs = qs.filter(queued_at__gte=filters["since"])
    if filters.get("until"):
        qs = qs.filter(queued_at__lt=filters["until"])
    if filters.get("hide_backfills"):
        qs = qs.filter(backfill__isnull=True)
    if filters.get("from") or filters.get("to"):
        # a timeline slice: started (queued, if never started) in [from, to), as its bar counted them; the queue
        # time bounds the scan (a run starts after it is queued, and within the timeline's reach back)
        started = Coalesce("started_at", "queued_at")
        if filters.get("from"):
            qs = qs.alias(began=started).filter(began__gte=filters["from"],
                                                queued_at__gte=filters["from"] - timeline.REACH_BACK)
        if filters.get("to"):
            qs = qs.alias(began=started).filter(began__lt=filters["to"], queued_at__lt=filters["to"])
    return owned_by(qs, filters.get("team_ids"))


def runs_keyset_page(filters: dict, *, before: int | None = None, after: int | None = None, size: int = 50) -> dict:
    """One page of runs, newest first, by id cursor.

    Never COUNT(*): with a million rows a count costs more than the page. Every
    filter has an index ending in id (status, schedule, trigger_kind) so the
    database walks the index backwards and stops after size + 1 rows.
    """
    qs = (
        run_filters_apply(Run.objects.all(), filters)
        .select_related("schedule", "workload_class")
        .only(*RUN_LIST_FIELDS)
    )
    if after is not None:
        rows = list(qs.filter(id__gt=after).order_by("id")[: size + 1])
        has_newer = len(rows) > size
        rows = list(reversed(rows[:size]))
        has_older = bool(rows) and qs.filter(id__lt=rows[-1].id).order_by("-id").exists()
    else:
        if before is not None:
            qs = qs.filter(id__lt=before)
        rows = list(qs.order_by("-id")[: size + 1])
        has_older = len(rows) > size
        rows = rows[:size]
        has_newer = before is not None
    return {
        "runs": rows,
        "older": rows[-1].id if rows and has_older else None,
        "newer": rows[0].id if rows and has_newer else None,
    }


# --- one run ----------------------------------------------------------------


def run_upstreams(run: Run) -> list[dict]:
    """The upstream runs `run` stands for: recorded when it was triggered, admitted or blocked.

    A run still waiting shows the runs it is being judged on now.
    """
    rows = [
        {"schedule": link.upstream_schedule, "run": link.upstream_run, "pinned": link.pinned, "live": False}
        for link in RunUpstream.objects.filter(run=run).select_related("upstream_schedule", "upstream_run")
        .order_by("upstream_schedule__name")
    ]
    if run.status in (RunStatus.QUEUED, RunStatus.WAITING) and run.backfill_id is None:
        recorded = {row["schedule"].pk for row in rows}
        matches = [m for m in verdict_for(run).matches if m.upstream.pk not in recorded]
        found = Run.objects.in_bulk([m.run_id for m in matches if m.run_id])
        rows += [{"schedule": m.upstream, "run": found.get(m.run_id), "pinned": m.pinned, "live": True}
                 for m in matches]
    return rows


def run_log_lines(run: Run, *, after: int = 0, limit: int = 5000, node: str | None = None):
    """The run's log lines after seq `after`, oldest first (the run page follows a RUNNING run with this).

    `node`: only the lines of that workflow (or dbt) node."""
    lines = RunLogLine.objects.filter(run=run, seq__gt=after)
    if node is not None:
        lines = lines.filter(node=node)
    return list(lines.order_by("seq")[:limit])


def run_log_nodes(run: Run, *, limit: int | None = None) -> list[str]:
    """The nodes a run's log lines or node records name, in the order of their first record, then of the log.

    With `limit`, at most that many (a dbt project names thousands: the run page then asks for a name)."""
    named = NodeRecord.objects.filter(run=run).order_by("id").values_list("task_id", flat=True)
    logged = (RunLogLine.objects.filter(run=run).exclude(node="").values_list("node", flat=True)
              .distinct().order_by("node"))
    if limit is not None:
        named, logged = named[:limit], logged[:limit]
    return list(dict.fromkeys(list(named) + list(logged)))[:limit]


def run_names_node(run: Run, node: str) -> bool:
    """Whether the run's node records or log lines name `node`."""
    return (NodeRecord.objects.filter(run=run, task_id=node).exists()
            or RunLogLine.objects.filter(run=run, node=node).exists())


def log_line_text(line: RunLogLine) -> str:
    """One log line as plain text (the log as text, `manage.py run_log`): UTC time, level, source [node], message;
    a terminal's control characters (a command's colours, cursor moves, OSC sequences) shown escaped."""
    source = f"{line.source} [{line.node}]" if line.node else line.source
    return terminal_safe(f"{line.at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC {line.level:<7} {source}: {line.message}")
