"""OpenLineage run events, written to the outbox in the transaction of the run's state change they report.

A run gets START when a worker first claims it, then exactly one end event when it becomes final: COMPLETE
(SUCCEEDED, or SKIPPED after it began), FAIL (FAILED for good), ABORT (CANCELLED, or BLOCKED after it began). A
re-queued attempt emits nothing when it fails and RUNNING when it is claimed again. A run that never began
(cancelled while queued, born BLOCKED or SKIPPED) emits nothing: a lineage consumer then shows no run that
did nothing. Every event of a run carries the same runId (`run_uuid`). A workflow's nodes are jobs of their
own, `<schedule>.<node>`, with a `parent` facet naming the workflow run (docs/lineage.md).

With lineage off (`lineage_enabled()` false) no function here touches the database. Rows are inserted at
once, or, inside `lineage_batch()` (a worker's batch of ends), collected and inserted by one statement when
the batch's body is done, still inside its transaction. This module writes; lineage_send.py sends.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import uuid
from datetime import UTC, datetime
from typing import Any, Iterator

from django.conf import settings
from django.db import transaction
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run as OLRun, RunEvent, RunState
from openlineage.client.facet_v2 import error_message_run, job_type_job, nominal_time_run, parent_run
from openlineage.client.serde import Serde

from scheduler.core import LineageDataset
from scheduler.models import LineageEvent, NodeOutcome, Run, RunStatus, TargetKind

log = logging.getLogger(__name__)
S = RunStatus
START, RUNNING, COMPLETE, FAIL, ABORT = "START", "RUNNING", "COMPLETE", "FAIL", "ABORT"
END_OF = {S.SUCCEEDED: COMPLETE, S.SKIPPED: COMPLETE, S.FAILED: FAIL, S.CANCELLED: ABORT, S.BLOCKED: ABORT}
RUN_FACET, WINDOW_FACET = "etlScheduler_run", "etlScheduler_window"
_IO_ATTR = "_lineage_io"  # a run's datasets, attached in memory by the worker for its end event


# --- is lineage on? ---------------------------------------------------------------

def lineage_configured() -> bool:
    """The OpenLineage client's standard configuration is present (so it would not fall back to the console)."""
    return _configured()


@functools.lru_cache(maxsize=1)
def _configured() -> bool:
    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OPENLINEAGE_URL", "").strip():
        return True
    if any(name.startswith("OPENLINEAGE__TRANSPORT") for name in os.environ):
        return True
    paths = [os.environ.get("OPENLINEAGE_CONFIG", ""), os.path.join(os.getcwd(), "openlineage.yml"),
             os.path.join(os.path.expanduser("~/.openlineage"), "openlineage.yml")]
    return any(path and os.path.isfile(path) for path in paths)


def lineage_enabled() -> bool:
    """ETL_LINEAGE: on, off, or auto (on when the client is configured)."""
    mode = settings.ETL_LINEAGE
    return mode == "on" or (mode == "auto" and _configured())


def lineage_reset() -> None:
    """Read the environment again (tests, and after a configuration change)."""
    _configured.cache_clear()


def lineage_atomic():
    """A transaction around a state change and its event when lineage is on; nothing at all when it is off."""
    return transaction.atomic() if lineage_enabled() else contextlib.nullcontext()


# --- identities -------------------------------------------------------------------

def run_uuid(run: Run) -> str:
    """The run's OpenLineage runId: a uuid5 of the namespace, the run's id and its queue time.

    Derived, not stored: every process computes the same id for the run without a column or a read, and the
    queue time (never changed after the run is created) keeps two databases' run 7 apart.
    """
    queued = run.queued_at.astimezone(UTC).isoformat() if run.queued_at else ""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{settings.ETL_LINEAGE_PRODUCER}/{_namespace()}/run/{run.pk}/{queued}"))


def node_uuid(parent: str, task_id: str, attempt: int) -> str:
    """A workflow node's runId: one per node and run attempt (a node run again in a later attempt is a new run)."""
    return str(uuid.uuid5(uuid.UUID(parent), f"node/{task_id}/{attempt}"))


def _namespace() -> str:
    return settings.ETL_LINEAGE_NAMESPACE


# --- datasets ---------------------------------------------------------------------

def lineage_attach(run: Run, *, inputs: list[LineageDataset], outputs: list[LineageDataset]) -> None:
    """The datasets the run's pipeline reads and writes, for its end event (kept on the instance, not stored)."""
    setattr(run, _IO_ATTR, (list(inputs), list(outputs)))


def datasets_of(pipeline: Any, ctx: Any = None) -> tuple[list[LineageDataset], list[LineageDataset]]:
    """A pipeline's (inputs, outputs) with the run context's declared ones; never raises (lineage never fails a run)."""
    inputs: list[LineageDataset] = []
    outputs: list[LineageDataset] = []
    try:
        if pipeline is not None and hasattr(pipeline, "lineage"):
            inputs, outputs = pipeline.lineage()
        if ctx is not None:
            inputs = list(dict.fromkeys([*inputs, *getattr(ctx, "lineage_inputs", [])]))
            outputs = list(dict.fromkeys([*outputs, *getattr(ctx, "lineage_outputs", [])]))
    except Exception:
        log.warning("could not name the datasets of %r for lineage", pipeline, exc_info=True)
    return inputs, outputs


# --- events -----------------------------------------------------------------------

def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _facet(name: str, **fields: Any) -> dict[str, Any]:
    """One of this product's custom facets, named and described as the spec asks (`_producer`, `_schemaURL`)."""
    return {"_producer": settings.ETL_LINEAGE_PRODUCER,
            "_schemaURL": f"{settings.ETL_LINEAGE_SCHEMA_URL}#/$defs/{name}", **fields}


def _run_facets(run: Run, event_type: str) -> dict[str, Any]:
    producer = settings.ETL_LINEAGE_PRODUCER
    facets: dict[str, Any] = {
        RUN_FACET: _facet("RunFacet", runId=run.pk, status=run.status, attempt=run.attempt,
                          maxAttempts=run.max_attempts, triggerKind=run.trigger_kind, reason=run.reason or None,
                          rowsLoaded=run.rows_loaded),
    }
    if run.window_low or run.window_high or run.backfill_id:
        facets[WINDOW_FACET] = _facet("WindowRunFacet", low=run.window_low or None, high=run.window_high or None,
                                      backfillId=run.backfill_id)
    if run.logical_time is not None:
        facets["nominalTime"] = Serde.to_dict(nominal_time_run.NominalTimeRunFacet(
            nominalStartTime=_iso(run.logical_time), producer=producer))
    if event_type == FAIL:
        facets["errorMessage"] = Serde.to_dict(error_message_run.ErrorMessageRunFacet(
            message=run.reason or "failed", programmingLanguage="python",
            stackTrace=(run.error or None) and run.error[-4000:], producer=producer))
    return facets


def _job_facets(job_type: str) -> dict[str, Any]:
    return {"jobType": Serde.to_dict(job_type_job.JobTypeJobFacet(
        processingType="BATCH", integration="ETL_SCHEDULER", jobType=job_type, producer=settings.ETL_LINEAGE_PRODUCER))}


def _datasets(kind: type, datasets: list[LineageDataset]) -> list[Any]:
    return [kind(namespace=d.namespace, name=d.name) for d in datasets]


def build_event(*, run: Run, event_type: str, at: datetime, job_name: str | None = None,
                job_type: str | None = None, run_id: str | None = None, parent: tuple[str, str] | None = None,
                inputs: list[LineageDataset] = (), outputs: list[LineageDataset] = (),
                facets: dict[str, Any] | None = None) -> dict[str, Any]:
    """The RunEvent as the JSON it is stored and sent as. `parent` is (job name, runId) of the parent run."""
    run_facets = facets if facets is not None else _run_facets(run, event_type)
    if parent is not None:
        run_facets = {**run_facets, "parent": Serde.to_dict(parent_run.ParentRunFacet(
            run=parent_run.Run(runId=parent[1]), job=parent_run.Job(namespace=_namespace(), name=parent[0]),
            root=parent_run.Root(run=parent_run.RootRun(runId=parent[1]),
                                 job=parent_run.RootJob(namespace=_namespace(), name=parent[0])),
            producer=settings.ETL_LINEAGE_PRODUCER))}
    event = RunEvent(
        eventType=RunState(event_type), eventTime=_iso(at), producer=settings.ETL_LINEAGE_PRODUCER,
        run=OLRun(runId=run_id or run_uuid(run), facets=run_facets),
        job=Job(namespace=_namespace(), name=job_name or run.schedule.name,
                facets=_job_facets(job_type or _job_type(run))),
        inputs=_datasets(InputDataset, list(inputs)), outputs=_datasets(OutputDataset, list(outputs)),
    )
    return Serde.to_dict(event)


def event_from_payload(payload: dict[str, Any]) -> RunEvent:
    """A stored payload as the client's RunEvent again (facets stay the stored JSON), for `client.emit`."""
    run, job = payload["run"], payload["job"]
    return RunEvent(
        eventType=RunState(payload["eventType"]), eventTime=payload["eventTime"], producer=payload["producer"],
        run=OLRun(runId=run["runId"], facets=run.get("facets") or {}),
        job=Job(namespace=job["namespace"], name=job["name"], facets=job.get("facets") or {}),
        inputs=[InputDataset(namespace=d["namespace"], name=d["name"], facets=d.get("facets") or {},
                             inputFacets=d.get("inputFacets") or {}) for d in payload.get("inputs") or []],
        outputs=[OutputDataset(namespace=d["namespace"], name=d["name"], facets=d.get("facets") or {},
                               outputFacets=d.get("outputFacets") or {}) for d in payload.get("outputs") or []],
    )


def _job_type(run: Run) -> str:
    kind = run.schedule.target_kind
    return {TargetKind.WORKFLOW: "WORKFLOW", TargetKind.COMMAND: "COMMAND"}.get(kind, "PIPELINE")


def _row(run: Run | None, payload: dict[str, Any], now: datetime) -> LineageEvent:
    return LineageEvent(run=run, run_uuid=payload["run"]["runId"], event_type=payload["eventType"],
                        job_name=payload["job"]["name"][:400], payload=payload, created_at=now, next_attempt_at=now)


# --- the outbox writes, in the caller's transaction --------------------------------

class _Batch:
    def __init__(self) -> None:
        self.rows: list[LineageEvent] = []


_local = threading.local()


def _built(what: str, run: Run, build) -> list[LineageEvent]:
    """The rows `build()` makes; an event that cannot be built is logged and left out (never fails the run)."""
    try:
        return build()
    except Exception:
        log.exception("could not build the lineage %s event of run %s; not sent", what, run.pk)
        return []


def _record(rows: list[LineageEvent]) -> None:
    batch: _Batch | None = getattr(_local, "batch", None)
    if batch is not None:
        batch.rows.extend(rows)
    elif rows:
        LineageEvent.objects.bulk_create(rows)


@contextlib.contextmanager
def lineage_batch() -> Iterator[None]:
    """Collect the events of the body and insert them with one statement when it is done (inside the caller's
    transaction). Nested: the outermost inserts. An exception discards what was collected."""
    if not lineage_enabled() or getattr(_local, "batch", None) is not None:
        yield
        return
    batch = _local.batch = _Batch()
    try:
        yield
    finally:
        _local.batch = None
    if batch.rows:
        LineageEvent.objects.bulk_create(batch.rows)


def lineage_mark() -> int:
    """Where the current batch stands, to drop what a rolled-back savepoint collected (`lineage_discard`)."""
    batch: _Batch | None = getattr(_local, "batch", None)
    return len(batch.rows) if batch is not None else 0


def lineage_discard(mark: int) -> None:
    batch: _Batch | None = getattr(_local, "batch", None)
    if batch is not None:
        del batch.rows[mark:]


def _started_before(run: Run) -> bool:
    return LineageEvent.objects.filter(run_id=run.pk, event_type=START).exists()


def lineage_run_began(*, run: Run, now: datetime) -> None:
    """A worker claimed `run` (in the claim's transaction): START, or RUNNING for a later attempt of a run that
    started already. A first attempt reads nothing; a later one asks the outbox whether START was written."""
    if not lineage_enabled():
        return
    event_type = RUNNING if run.attempt > 1 and _started_before(run) else START
    _record(_built(event_type, run, lambda: [_row(run, build_event(run=run, event_type=event_type, at=now), now)]))


def lineage_run_ended(*, run: Run, old: str, now: datetime) -> None:
    """`run` became final (from `old`), in the transaction that made it so: its one end event, if it began.

    A run claimed in this attempt (started_at set) began; a run with attempt 1 not claimed now never began; a
    re-queued run that ends before it is claimed again began if its START is in the outbox.
    """
    if not lineage_enabled():
        return
    event_type = END_OF.get(run.status)
    if event_type is None:
        return
    began = run.started_at is not None or (run.attempt > 1 and _started_before(run))
    if not began:
        return
    inputs, outputs = getattr(run, _IO_ATTR, ((), ()))
    _record(_built(event_type, run, lambda: [
        _row(run, build_event(run=run, event_type=event_type, at=now, inputs=inputs, outputs=outputs), now)]))


def lineage_node_finished(*, run: Run, task_id: str, outcome: str, started_at: datetime, finished_at: datetime,
                          reason: str = "", rows: int | None = None,
                          datasets: tuple[list[LineageDataset], list[LineageDataset]] | None = None) -> None:
    """A workflow node ran (in the transaction of its record): START and its end, as the job `<schedule>.<node>`
    with a `parent` facet naming the workflow run."""
    if not lineage_enabled():
        return
    _record(_built("node", run, lambda: _node_rows(run=run, task_id=task_id, outcome=outcome, started_at=started_at,
                                                    finished_at=finished_at, reason=reason, rows=rows,
                                                    datasets=datasets)))


def _node_rows(*, run: Run, task_id: str, outcome: str, started_at: datetime, finished_at: datetime, reason: str,
               rows: int | None, datasets: tuple[list[LineageDataset], list[LineageDataset]] | None,
               ) -> list[LineageEvent]:
    parent = run_uuid(run)
    node_id = node_uuid(parent, task_id, run.attempt)
    name = f"{run.schedule.name}.{task_id}"
    inputs, outputs = datasets or ((), ())
    end = COMPLETE if outcome == NodeOutcome.SUCCESS else FAIL
    events = []
    for event_type, at in ((START, started_at), (end, finished_at)):
        facets = {RUN_FACET: _facet("NodeRunFacet", node=task_id, outcome=outcome if event_type != START else None,
                                    runAttempt=run.attempt, reason=reason or None, rows=rows)}
        if event_type == FAIL:
            facets["errorMessage"] = Serde.to_dict(error_message_run.ErrorMessageRunFacet(
                message=reason or "failed", programmingLanguage="python", producer=settings.ETL_LINEAGE_PRODUCER))
        events.append(_row(run, build_event(run=run, event_type=event_type, at=at, job_name=name, job_type="TASK",
                                            run_id=node_id, parent=(run.schedule.name, parent), inputs=inputs,
                                            outputs=outputs, facets=facets), finished_at))
    return events


__all__ = [
    "ABORT", "COMPLETE", "FAIL", "RUNNING", "START", "build_event", "datasets_of", "event_from_payload",
    "lineage_atomic", "lineage_attach", "lineage_batch", "lineage_configured", "lineage_discard", "lineage_enabled",
    "lineage_mark", "lineage_node_finished", "lineage_reset", "lineage_run_began", "lineage_run_ended", "node_uuid",
    "run_uuid",
]
