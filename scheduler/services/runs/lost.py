"""A run whose worker is gone (governance found no heartbeat, or a cluster's reaper found its process dead).

Its end is a `lost` end (scheduler/core/ends.py): re-queued while the run's one attempt budget lasts, else FAILED.
A stop request the row holds outranks it: a run a person cancelled ends CANCELLED, a timed-out one FAILED (or
QUEUED again), never a plain re-queue. The compare-and-set holds what governance read (the worker's token, the
stale heartbeat, the attempt), so a worker whose heartbeat resumed keeps its run.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction

from scheduler.core.ends import EndKind, yields_to
from scheduler.models import Run, RunStatus, requeue_fields
from scheduler.services.common import bulk
from scheduler.services.common.audit import audit_build, audit_record_many
from scheduler.services.history.outcomes import outcomes_batch, outcomes_record
from scheduler.services.history.tally import runs_ended
from scheduler.services.integrations.lineage import lineage_batch, lineage_run_ended
from scheduler.services.runs.end import Ending, _after_final, run_end
from scheduler.services.runs.transitions import send_after_commit, set_fields

log = logging.getLogger(__name__)
S = RunStatus


def run_lost(*, run: Run, now: datetime, why: str, actor: Any = "governance") -> str:
    """`run`'s worker is gone: its end as `runs/end.py` writes it. Returns 'requeued', 'failed', 'stopped' (a stop
    request stood) or 'changed' (someone else got there first)."""
    ending = Ending(run=run, kind=EndKind.LOST, now=now, reason=why, token=run.dispatch_token, actor=actor)
    asked = bool(run.stop_kind)
    if not run_end(ending):
        return "changed"
    if asked or run.stop_kind:
        return "stopped"
    return "requeued" if run.status == S.QUEUED else "failed"


def run_stop_settled(*, run: Run, now: datetime, why: str, actor: Any = "governance") -> bool:
    """A STOPPING run whose work has ended without its worker writing the end (the worker was killed, or died):
    the stop's end, as a lost end meets the row's request."""
    return run_lost(run=run, now=now, why=why, actor=actor) == "stopped"


def lost_why(run: Run) -> str:
    beat = f"{run.heartbeat_at:%H:%M:%S} UTC" if run.heartbeat_at else "its start"
    return f"worker lost: no heartbeat from {run.worker_id or 'its worker'} since {beat}"


def runs_lost(*, runs: list[Run], now: datetime) -> dict[str, list[int]]:
    """Governance: many lost runs (with no stop request) settled in bulk statements; {'requeued', 'failed'}.

    Each run gets run_lost's end with the same guard, but per tick, not per run: one UPDATE re-queues every run
    with attempts left and one fails every run whose attempts are spent. If the bulk path raises, it is rolled
    back and every run is settled on its own (run_lost, a savepoint each).
    """
    if not runs:
        return {"requeued": [], "failed": []}
    if bulk.supported():
        read = {run.pk: {name: getattr(run, name) for name in _LOST_FIELDS} for run in runs}
        try:
            with transaction.atomic(), lineage_batch(), outcomes_batch():
                return _runs_lost_bulk(runs, now=now)
        except Exception:
            log.exception("settling %d lost runs in bulk failed; settling them one at a time", len(runs))
            for run in runs:  # back to what governance read: the guards of the per-run path
                set_fields(run, **read[run.pk])
    out: dict[str, list[int]] = {"requeued": [], "failed": []}
    with transaction.atomic(), outcomes_batch():
        for run in runs:
            try:
                with transaction.atomic():
                    outcome = run_lost(run=run, now=now, why=lost_why(run))
            except Exception:  # one run's failing end must not roll back the others'
                log.exception("could not settle lost run %s", run.pk)
                continue
            if outcome in out:
                out[outcome].append(run.pk)
    return out


# what runs_lost changes on a run in memory (restored if the bulk path rolls back)
_LOST_FIELDS = ("status", "attempt", "started_at", "admitted_at", "heartbeat_at", "dispatch_token", "worker_id",
                "reason", "finished_at", "stop_requested_at", "stop_kind", "stop_reason", "not_before")


def _requeue_sql() -> str:
    """`models.requeue_fields` as a bulk UPDATE's SET clause (the attempt spent, the reason per row)."""
    parts = []
    for column, value in requeue_fields(reason="", attempt=0).items():
        if column == "status":
            parts.append("status = %s")
        elif column == "attempt":
            parts.append("attempt = v.attempt + 1")
        elif column == "reason":
            parts.append("reason = v.reason")
        else:
            parts.append(f"{column} = {'NULL' if value is None else repr(value)}")
    return ", ".join(parts)


def _runs_lost_bulk(runs: list[Run], *, now: datetime) -> dict[str, list[int]]:
    columns = [("id", "id"), ("token", "dispatch_token"), ("beat", "heartbeat_at"), ("attempt", "attempt"),
               ("reason", "reason")]
    allowed = yields_to(EndKind.LOST)  # the table: a row that got a stop request meanwhile is left to the next tick
    guard = (f"t.status = %s AND t.dispatch_token = v.token AND {bulk.same('t.heartbeat_at', 'v.beat')} "
             f"AND t.attempt = v.attempt AND t.stop_kind IN ({', '.join(['%s'] * len(allowed))})")
    why = {run.pk: lost_why(run) for run in runs}
    spare = [run for run in runs if run.attempt < run.max_attempts]
    spent = [run for run in runs if run.attempt >= run.max_attempts]
    reasons = {r.pk: f"{why[r.pk]}; re-queued (attempt {r.attempt + 1}/{r.max_attempts})"[:500] for r in spare}
    reasons.update({r.pk: f"{why[r.pk]} (attempt {r.attempt}/{r.max_attempts})"[:500] for r in spent})
    requeued = bulk.cas_update(
        Run, columns=columns, rows=[(r.pk, r.dispatch_token, r.heartbeat_at, r.attempt, reasons[r.pk]) for r in spare],
        assign=_requeue_sql(), assign_params=[S.QUEUED], guard=guard, guard_params=[S.RUNNING, *allowed],
    )
    failed = bulk.cas_update(
        Run, columns=[*columns, ("finished_at", "finished_at")],
        rows=[(r.pk, r.dispatch_token, r.heartbeat_at, r.attempt, reasons[r.pk], now) for r in spent],
        assign="status = %s, finished_at = v.finished_at, reason = v.reason",
        assign_params=[S.FAILED], guard=guard, guard_params=[S.RUNNING, *allowed],
    )
    runs_ended(S.FAILED, failed)
    entries = []
    for run in runs:
        if run.pk not in requeued and run.pk not in failed:
            continue  # its worker came back, or someone else settled it first
        worker = run.worker_id
        if run.pk in requeued:
            set_fields(run, **requeue_fields(reason=reasons[run.pk], attempt=run.attempt + 1))
            send_after_commit(run, S.QUEUED, S.RUNNING)
            outcome = "requeued"
        else:
            set_fields(run, status=S.FAILED, finished_at=now, reason=reasons[run.pk])
            lineage_run_ended(run=run, old=S.RUNNING, now=now)
            send_after_commit(run, S.FAILED, S.RUNNING)
            _after_final(run, now=now)
            outcome = "failed"
        entries.append(audit_build(actor="governance", action=f"run.worker_lost.{outcome}", target=run,
                                   before={"status": S.RUNNING, "worker": worker}, after={"status": run.status},
                                   reason=why[run.pk][:500], at=now))
    audit_record_many(entries)
    outcomes_record(run for run in spent if run.pk in failed)
    return {"requeued": [r.pk for r in spare if r.pk in requeued], "failed": [r.pk for r in spent if r.pk in failed]}


__all__ = ["lost_why", "run_lost", "run_stop_settled", "runs_lost"]
