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

from datetime import datetime
from typing import Any

from django.db import connection, transaction

from scheduler.core import Outcome, RunRecord
from scheduler.core.dbt_results import rerun_selector, selection_words
from scheduler.models import NodeOutcome, NodeRecord, Run
from scheduler.services.integrations.lineage import lineage_enabled, lineage_node_finished



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
_REASON, _ERROR = NodeRecord._meta.get_field("reason"), NodeRecord._meta.get_field("error")  # masked fields
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
                # masked as the model's fields mask them (a plain INSERT passes no field)
                _text(record.watermark), _REASON.get_prep_value(record.reason or "")[:500],
                _ERROR.get_prep_value((record.error or "").replace("\x00", "\\x00")),
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


def nodes_run_here(run: Run) -> set[str] | None:
    """For a re-run from failure, the nodes this run itself completed in its earlier attempts (None for any
    other run: every node it resumed was its own)."""
    if not run.retry_of_id:
        return None
    return set(NodeRecord.objects.filter(run_id=run.pk, outcome=NodeOutcome.SUCCESS, resumed=False)
               .values_list("task_id", flat=True))


def rows_run_here(report, here: set[str] | None) -> int:
    """A workflow run's rows: those of the nodes it ran (`nodes_run_here`), not of the nodes a re-run from
    failure carried over from the run it repeats (issue 37: it reported the whole workflow's rows)."""
    if here is None:
        return report.rows
    return sum(r.rows or 0 for r in report.records if not r.resumed or r.task_id in here)


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


__all__ = ["NodeLedger", "dbt_rerun_select", "node_records", "node_records_shown", "nodes_done", "nodes_run_here",
           "rows_run_here"]


def dbt_rerun_select(run: Run) -> list[str]:
    """The `--select` of a re-run of `run` from its failure: what failed or was skipped, with its children,
    within the schedule's own `select`.

    Empty when `run` recorded no node that failed (dbt could not parse, or the
    run was cancelled before dbt wrote its results): then the whole build runs.
    """
    latest = NodeRecord.objects.filter(run=run).order_by("-run_attempt").values_list("run_attempt", flat=True)
    attempt = latest.first()
    if attempt is None:
        return []
    rows = NodeRecord.objects.filter(run=run, run_attempt=attempt).order_by("id").values_list("task_id", "outcome")
    return rerun_selector(rows, within=selection_words((run.schedule.dbt or {}).get("select")))
