"""Workflow node records: written as each node finishes, read to resume, re-run from failure.

The executor calls `NodeLedger.append` when a node finishes (success or
failure); each call is one committed INSERT, so a worker killed at node 900
of 1,000 leaves 899 records behind. On PostgreSQL that INSERT's own
transaction commits with `synchronous_commit = off`: committed and visible
the moment the call returns (a worker crash loses nothing), flushed to disk
by the WAL writer within 3 x `wal_writer_delay` (0.6 s by default), so only
a crash of the PostgreSQL server itself can lose the last records
(docs/semantics.md, "Node records"). A re-queued run (a lost worker) or a
run re-run from failure hands the nodes that already succeeded for it to the
executor as `done`: they are not run again. This module records and reads;
how a run ends is finish.py's.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from scheduler.core import Outcome, RunRecord
from scheduler.models import NodeOutcome, NodeRecord, Run, RunStatus, TargetKind, TriggerKind
from scheduler.services.common.audit import actor_name, audit_record
from scheduler.services.worker.dbt import dbt_rerun_select
from scheduler.services.common.errors import ServiceError, check_text
from scheduler.services.integrations.lineage import lineage_enabled, lineage_node_finished
from scheduler.services.runs.queue import run_build

# a workflow run that ended in one of these may be re-run from its failure
RERUNNABLE = (RunStatus.FAILED, RunStatus.CANCELLED)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return (value.isoformat() if isinstance(value, datetime) else str(value))[:64]


_COLUMNS = ("run_id", "run_attempt", "task_id", "outcome", "attempts", "resumed", "started_at", "finished_at",
            "rows", "watermark", "reason", "error")
_INSERT = 'INSERT INTO "{table}" ({columns}) VALUES ({marks})'.format(
    table=NodeRecord._meta.db_table, columns=", ".join(f'"{c}"' for c in _COLUMNS),
    marks=", ".join(["%s"] * len(_COLUMNS)),
)
# PostgreSQL: one statement string, one round trip. Sent by the simple query
# protocol it runs as one implicit transaction, so SET LOCAL covers exactly this
# INSERT's commit: no BEGIN/COMMIT round trips, nothing else on the connection changes.
_INSERT_ASYNC_COMMIT = "SET LOCAL synchronous_commit = off; " + _INSERT


class NodeLedger:
    """The executor's ledger for one run: a row per node as it finishes; freshness from earlier runs."""

    def __init__(self, run: Run) -> None:
        self.run = run
        # node id -> (inputs, outputs) for its lineage events (filled by the worker when lineage is on)
        self.datasets: dict[str, tuple[list, list]] = {}
        # PostgreSQL with client-side binding (Django's default) can send two statements in one string
        self.async_commit = (connection.vendor == "postgresql"
                             and not connection.settings_dict.get("OPTIONS", {}).get("server_side_binding"))

    def append(self, record: RunRecord) -> None:
        # One INSERT in autocommit, no SELECT, no savepoint: committed the moment the
        # node is done. A plain statement rather than Model.objects.create: the ORM's
        # save path cost five times the INSERT itself, and this runs once per node
        # (docs/benchmarks.md, scenario 4). On PostgreSQL the commit does not wait for
        # the WAL flush (the flush was most of the cost); inside a caller's transaction
        # the caller's commit decides, so its setting is left alone there.
        if lineage_enabled() and not record.resumed:
            # with lineage on, the record and the node's events commit together (a resumed node's were sent
            # by the attempt that ran it)
            with transaction.atomic():
                self._insert(record, _INSERT)
                lineage_node_finished(run=self.run, task_id=record.task_id, outcome=Outcome(record.outcome).value,
                                      started_at=record.started_at, finished_at=record.finished_at,
                                      reason=record.reason or "", rows=record.rows,
                                      datasets=self.datasets.get(record.task_id))
            return
        self._insert(record, _INSERT_ASYNC_COMMIT if self.async_commit and connection.get_autocommit() else _INSERT)

    def _insert(self, record: RunRecord, sql: str) -> None:
        adapt = connection.ops.adapt_datetimefield_value
        with connection.cursor() as cursor:
            cursor.execute(sql, [
                self.run.pk, self.run.attempt, record.task_id[:200], Outcome(record.outcome).value, record.attempts,
                bool(record.resumed), adapt(record.started_at), adapt(record.finished_at), int(record.rows or 0),
                _text(record.watermark), (record.reason or "")[:500], (record.error or "").replace("\x00", "\\x00"),
            ])

    def last_success(self, task_id: str) -> RunRecord | None:
        row = (
            NodeRecord.objects.filter(run__schedule_id=self.run.schedule_id, task_id=task_id,
                                      outcome=NodeOutcome.SUCCESS)
            .order_by("-finished_at").first()
        )
        if row is not None:
            return _record(row)
        # runs from before node records: their report holds the nodes
        reports = (
            Run.objects.filter(schedule_id=self.run.schedule_id, report__isnull=False)
            .order_by("-id").values_list("report", flat=True)[:50]
        )
        for data in reports:
            for rec in reversed((data or {}).get("records", [])):
                if rec.get("task_id") == task_id and rec.get("outcome") == Outcome.SUCCESS.value:
                    return RunRecord.from_dict(rec)
        return None


def _record(row: NodeRecord) -> RunRecord:
    return RunRecord(row.task_id, Outcome(row.outcome), row.started_at, row.finished_at, rows=row.rows,
                     watermark=row.watermark or None, reason=row.reason, attempts=row.attempts, resumed=row.resumed)


def nodes_done(run: Run) -> dict[str, RunRecord]:
    """Nodes that already succeeded for `run`: in its earlier attempts, or in the run it re-runs from failure."""
    ids = [run.pk] + ([run.retry_of_id] if run.retry_of_id else [])
    rows = NodeRecord.objects.filter(run_id__in=ids, outcome=NodeOutcome.SUCCESS).order_by("id")
    return {row.task_id: _record(row) for row in rows}


def node_records(run: Run) -> list[NodeRecord]:
    """Every node record of the run, in the order the nodes finished (for commands and the executor's tests)."""
    return list(NodeRecord.objects.filter(run=run).order_by("id"))


def node_records_shown(run: Run, *, limit: int) -> dict:
    """At most `limit` of the run's node records for its page, in the order the nodes finished; past the limit
    those that did not succeed are chosen first. `total` counts them all (a dbt project can have thousands)."""
    records = NodeRecord.objects.filter(run=run)
    # node_run_outcome_idx: each part reads at most `limit` rows of this run
    rows = list(records.exclude(outcome=NodeOutcome.SUCCESS).order_by("id")[:limit])
    if len(rows) < limit:
        rows += list(records.filter(outcome=NodeOutcome.SUCCESS).order_by("id")[:limit - len(rows)])
    total = records.count() if len(rows) == limit else len(rows)
    return {"rows": sorted(rows, key=lambda r: r.pk), "total": total}


def run_rerun_from_failure(*, run: Run, actor: Any, reason: str = "", now: datetime | None = None) -> Run:
    """Queue a new run of a failed workflow (or dbt) run that skips the nodes which already succeeded.

    The new run has the same params, window and logical time, is a RETRY run
    whose `retry_of` is the failed one, and runs only the failed and blocked
    nodes (and those never reached); for dbt, `--select` the failed and
    skipped nodes with their children (services/dbt.py). Audited.
    """
    reason = check_text(reason, field="reason", max_length=500).strip()
    if run.schedule.target_kind not in (TargetKind.WORKFLOW, TargetKind.DBT):
        raise ServiceError(f"run {run.pk} is a {run.schedule.target_kind} run; only a workflow or dbt run can resume "
                           "from its failure (trigger the schedule again instead)", field="run")
    if run.status not in RERUNNABLE:
        raise ServiceError(f"run {run.pk} is {run.status}; only a FAILED or CANCELLED workflow or dbt run can be "
                           "re-run from its failure", field="run")
    if run.backfill_id is not None:
        raise ServiceError(f"run {run.pk} is a window of backfill {run.backfill_id}; retry it from the backfill",
                           field="run")
    if not run.schedule.enabled:
        raise ServiceError(f"schedule '{run.schedule.name}' is disabled; enable it first", field="schedule")
    now = now or timezone.now()
    who, _kind = actor_name(actor)
    window = (run.window_low, run.window_high) if (run.window_low or run.window_high) else None
    dbt = run.schedule.target_kind == TargetKind.DBT
    # a workflow skips the nodes that succeeded; dbt re-runs what failed or was skipped, and its children
    chosen = {"selects": dbt_rerun_select(run)} if dbt else {"skips": sorted(nodes_done(run))}
    with transaction.atomic():
        new = run_build(
            schedule=run.schedule, trigger_kind=TriggerKind.RETRY, trigger_key=f"resume:{run.pk}:{uuid.uuid4().hex}",
            params=dict(run.params or {}), logical_time=run.logical_time, triggered_by=who, window=window, now=now,
        )
        new.retry_of = run
        new.save(force_insert=True)  # a fresh uuid in the key: nothing to collide with
        audit_record(actor=actor, action="run.rerun_from_failure", target=run,
                     after={"run": new.pk, **chosen}, reason=reason, at=now)
    return new


__all__ = ["NodeLedger", "node_records", "node_records_shown", "nodes_done", "run_rerun_from_failure"]
