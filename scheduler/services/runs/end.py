"""The end of a run: the one module that makes a run final (or re-queues a lost one).

Every final transition of a run (SUCCEEDED, FAILED, SKIPPED, BLOCKED, CANCELLED) and the re-queue of a run whose
worker was lost goes through `run_finish` / `runs_finish` (a worker's batch), `run_cancel`, `run_lost` /
`runs_lost` or `run_refused` (finalize.py). Each applies, in the transaction that changes the row:

1. the compare-and-set on the run's status (and on the worker's dispatch token, the heartbeat governance judged
   stale, the attempt it counted): zero rows changed means someone else got there first, and nothing else happens;
2. the breaker result: a success or failure is counted, a test run that ends without a verdict releases its slot,
   a re-queued test run keeps it;
3. the watermark advance (a live run's success only);
4. backfill window progress, or downstream propagation (start or block the dependents, transitively);
5. the retry decision (a lost run is re-queued while the run's one attempt budget lasts);
6. the audit entry for changes made by a person or by governance;
7. the counts of final runs (tally.py) and the schedule's latest outcomes (outcomes.py: last, in `outcomes_batch`);

and the signals (`run_completed`, `run_failed`, `run_blocked`) go out after commit. Its parts live beside it: the
compare-and-set itself in finalize.py, the watermark advance in watermarks.py, backfill window progress in
backfill_progress.py, downstream propagation in downstream.py; what they do, and in which order, is decided here
(`_finish`, `_after_final`). Nothing else in the code base writes a final status but downstream.py, which blocks
the dependents of a run ended here (a test checks it: tests/services/test_import_graph.py).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduler.core import RetryPolicy
from scheduler.models import BreakerStatus, Run, RunStatus, Schedule, StopKind
from scheduler.services.common import bulk
from scheduler.services.common.audit import actor_name, audit_build, audit_record, audit_record_many
from scheduler.services.history.backfill_progress import backfill_window_done
from scheduler.services.runs.breakers import breaker_on_result, breaker_successes, breaker_trial_released
from scheduler.services.runs.downstream import children_of, propagate
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.transitions import finalize, send_after_commit, set_fields
from scheduler.services.integrations.lineage import lineage_batch, lineage_discard, lineage_mark, lineage_run_ended
from scheduler.services.history.outcomes import outcomes_batch, outcomes_record
from scheduler.services.runs.logs import run_log_append
from scheduler.services.history.tally import runs_ended
from scheduler.services.runs.watermarks import Loaded, watermark_advance_on_success

log = logging.getLogger(__name__)
S = RunStatus


@dataclass
class Ending:
    """One run's end as a worker reports it, for `runs_finish` (the arguments of `run_finish`)."""

    run: Run
    status: str
    now: datetime
    reason: str = ""
    token: str | None = None
    fields: dict[str, Any] | None = None
    loaded: Loaded | None = None
    stopped: bool = False  # the end of a stop request (stop_ending), not the code's own verdict
    retryable: bool = False  # a FAILED attempt that is re-queued while the run's attempts last (a command, a timeout)


# --- the public transitions ---------------------------------------------------

def run_finish(*, run: Run, status: str, now: datetime, reason: str = "", token: str | None = None,
               fields: dict[str, Any] | None = None, blocked_by: Schedule | None = None,
               loaded: Loaded | None = None, actor: Any = None, audit_action: str = "", stopped: bool = False,
               retryable: bool = False, then: Callable[[], Any] | None = None) -> bool:
    """Make `run` final with `status`; False when someone else changed it first.

    `token` (a worker's dispatch token) is part of the compare-and-set, so a worker whose run was cancelled or
    re-queued meanwhile changes nothing. A worker's own verdict (SUCCEEDED, FAILED) also needs the run not to have
    been asked to stop: if it was, the stop's outcome is written instead (nothing the code did after the request
    counts). `actor` + `audit_action` write an audit entry in the same transaction; `then()` adds its caller's
    part to a written end there (a worker's: the log, the next window).
    """
    with transaction.atomic(), outcomes_batch():  # then() inside: the outcome rows stay the last locks taken
        done = _finish(run=run, status=status, now=now, reason=reason, token=token, fields=fields,
                       blocked_by=blocked_by, loaded=loaded, actor=actor, audit_action=audit_action,
                       stopped=stopped, retryable=retryable)
        if done and then is not None:
            then()
        return done


def runs_finish(*, endings: list[Ending]) -> dict[int, str]:
    """A worker's batch of runs ends in one transaction, each run's end in its own savepoint.

    Each ending is what `run_finish` does for one run (the same compare-and-set
    on status and dispatch token, breaker, watermark, downstream propagation);
    a run whose end raises is rolled back to its savepoint alone and stays
    RUNNING (its heartbeat stops, so governance re-queues it as lost), and the
    others still commit. Downstream schedules are looked up once for the batch,
    not once per run. Returns run id -> the new status, 'discarded' (someone
    else changed the run first) or 'error'.
    """
    out: dict[int, str] = {}
    if not endings:
        return out
    children = children_of({e.run.schedule_id for e in endings})
    # the batch's lineage events go in one INSERT at the end of its transaction (none at all with lineage off)
    with transaction.atomic(), lineage_batch(), outcomes_batch():
        bare = [e for e in endings if _only_the_cas(e, children)]
        # a schedule with another kind of end in the batch keeps its runs' order (a failure, then a success)
        bare_ids = {e.run.pk for e in bare}
        ordered = {e.run.schedule_id for e in endings if e.run.pk not in bare_ids}
        bare = [e for e in bare if e.run.schedule_id not in ordered]
        if len(bare) > 1 and bulk.supported():
            mark = lineage_mark()
            try:
                with transaction.atomic(), outcomes_batch():
                    out.update(_succeed_together(bare))
            except Exception:  # the one statement failed: each run goes its own way below
                lineage_discard(mark)
                log.exception("could not finish %d runs together; finishing them one by one", len(bare))
        for e in endings:
            if e.run.pk in out:
                continue
            mark = lineage_mark()
            try:
                with transaction.atomic(), outcomes_batch():
                    done = _finish(run=e.run, status=e.status, now=e.now, reason=e.reason, token=e.token,
                                   fields=e.fields, loaded=e.loaded, children=children, stopped=e.stopped,
                                   retryable=e.retryable)
            except Exception:  # one run's failing end must not roll back the others'
                lineage_discard(mark)  # what its rolled-back savepoint reported is not sent either
                log.exception("could not finish run %s; left to governance", e.run.pk)
                out[e.run.pk] = "error"
                continue
            out[e.run.pk] = e.run.status if done else "discarded"
    return out


def run_cancel(*, run: Run, actor: Any, reason: str = "", now: datetime | None = None, force: bool = False) -> bool:
    """A person (or an overlap policy) cancels a run that is not final; False when someone else changed it first.

    A run that has not begun (queued, waiting, admitted but not claimed by a
    worker) is CANCELLED at once. A run whose code is executing is asked to
    stop instead: it shows as STOPPING, keeps its class slot and its
    schedule's serial gate, and becomes CANCELLED only when its worker
    reports that the work has ended (or, past the grace period, killed it).
    `force` (terminate) kills it at once, without the grace period; asking
    again with `force` escalates a pending cancel.
    """
    if run.is_final:
        raise ServiceError(f"run {run.pk} is already {run.status}", field="run")
    now = now or timezone.now()
    reason = reason or "cancelled"
    with transaction.atomic():
        if run.status != S.RUNNING:
            done = _finish(run=run, status=S.CANCELLED, now=now, reason=reason, actor=actor, audit_action="run.cancel")
            if done:
                _cancel_note(run, actor=actor, reason=reason, now=now)
            return done
        # not claimed by a worker yet: no code runs, so it ends now (the worker's claim needs started_at empty)
        if run.started_at is None and _finish(run=run, status=S.CANCELLED, now=now, reason=reason, actor=actor,
                                              audit_action="run.cancel", unstarted=True):
            _cancel_note(run, actor=actor, reason=reason, now=now)
            return True
        return run_stop_request(run=run, kind=StopKind.TERMINATE if force else StopKind.CANCEL, reason=reason,
                                now=now, actor=actor)


def _cancel_note(run: Run, *, actor: Any, reason: str, now: datetime) -> None:
    """The last line of a run cancelled before a worker began it: without it, a run re-queued after a failed
    attempt would end its log with that attempt's error and "re-queued (attempt N/M)"."""
    who, _kind = actor_name(actor)
    when = "it began" if run.attempt <= 1 else f"attempt {run.attempt} of {run.max_attempts} began"
    run_log_append(run_id=run.pk, message=f"cancelled by {who} before {when}: {reason}"[:2000], at=now)


def run_stop_request(*, run: Run, kind: str, reason: str, now: datetime, actor: Any = "system") -> bool:
    """Ask a RUNNING run's code to stop (compare-and-set on RUNNING with no request yet, or a cancel to terminate).

    Its worker reads the request with its next heartbeat. The run stays
    RUNNING (shown as STOPPING) until its end is written by `stop_ending`.
    """
    if kind not in StopKind.values:
        raise ServiceError(f"unknown stop kind {kind!r}", field="kind")
    pending = Q(stop_requested_at__isnull=True)
    if kind == StopKind.TERMINATE:
        # a cancel or a timeout in its grace period escalates to a kill (a person's decision: CANCELLED)
        pending |= Q(stop_kind__in=[StopKind.CANCEL, StopKind.TIMEOUT])
    with transaction.atomic():
        changed = Run.objects.filter(pending, pk=run.pk, status=S.RUNNING).update(
            stop_requested_at=now, stop_kind=kind, stop_reason=reason[:300])
        if not changed:
            return False
        set_fields(run, stop_requested_at=now, stop_kind=kind, stop_reason=reason[:300])
        audit_record(actor=actor, action=f"run.stop.{kind}", target=run, before={"status": S.RUNNING},
                     after={"status": "STOPPING", "stop": kind}, reason=reason[:500], at=now)
    return True


def run_stop_settled(*, run: Run, now: datetime, why: str, actor: Any = "governance") -> bool:
    """A STOPPING run whose work has ended without its worker writing the end (the worker was killed, or died):
    the stop's outcome, guarded by what the caller read (RUNNING, the token, the stop request, the heartbeat)."""
    status, reason = stop_outcome(kind=run.stop_kind, reason=run.stop_reason)
    guard = {"dispatch_token": run.dispatch_token, "stop_requested_at__isnull": False, "heartbeat_at": run.heartbeat_at}
    with transaction.atomic(), outcomes_batch():
        if run.stop_kind == StopKind.TIMEOUT and run.attempt < run.max_attempts:
            if not Run.objects.filter(pk=run.pk, status=S.RUNNING, **guard).exists():
                return False
            done = _retry_later(run, token=run.dispatch_token, now=now, reason=reason, fields={}, stopped=True)
        else:
            done = finalize(run, new=status, now=now, extra_filter=guard, reason=reason)
            if done:
                _after_final(run, now=now)
        if done:
            audit_record(actor=actor, action="run.stop.settled", target=run, before={"status": "STOPPING"},
                         after={"status": run.status}, reason=why[:500], at=now)
    return done


def stop_outcome(*, kind: str, reason: str) -> tuple[str, str]:
    """(final status, reason) of a run whose code stopped on a request: a cancel is CANCELLED, a timeout FAILED."""
    if kind == StopKind.TIMEOUT:
        return S.FAILED, reason or "timed out"
    return S.CANCELLED, reason or "cancelled"


def run_lost(*, run: Run, now: datetime, why: str) -> str:
    """Governance: `run`'s worker is gone. Re-queue it while its attempts last, else fail it.

    The compare-and-set includes the heartbeat governance judged stale and the
    attempt it counted: a worker whose heartbeat resumed in between, or which
    spent an in-process retry, keeps its run. A re-queued test run of a
    half-open breaker stays the test run. Returns 'requeued', 'failed' or 'changed'.
    """
    guard = {"dispatch_token": run.dispatch_token, "heartbeat_at": run.heartbeat_at, "attempt": run.attempt}
    with transaction.atomic(), outcomes_batch():
        if run.attempt < run.max_attempts:
            attempt = run.attempt + 1
            reason = f"{why}; re-queued (attempt {attempt}/{run.max_attempts})"[:500]
            changed = Run.objects.filter(pk=run.pk, status=S.RUNNING, **guard).update(
                status=S.QUEUED, attempt=attempt, started_at=None, admitted_at=None, heartbeat_at=None,
                dispatch_token="", worker_id="", reason=reason,
            )
            if not changed:
                return "changed"
            worker = run.worker_id
            set_fields(run, status=S.QUEUED, attempt=attempt, started_at=None, admitted_at=None, heartbeat_at=None,
                 dispatch_token="", worker_id="", reason=reason)
            send_after_commit(run, S.QUEUED, S.RUNNING)
            outcome = "requeued"
        else:
            reason = f"{why} (attempt {run.attempt}/{run.max_attempts})"[:500]
            worker = run.worker_id
            if not finalize(run, new=S.FAILED, now=now, extra_filter=guard, reason=reason):
                return "changed"
            _after_final(run, now=now)
            outcome = "failed"
        audit_record(actor="governance", action=f"run.worker_lost.{outcome}", target=run,
                     before={"status": S.RUNNING, "worker": worker}, after={"status": run.status},
                     reason=why[:500], at=now)
    return outcome


def runs_lost(*, runs: list[Run], now: datetime) -> dict[str, list[int]]:
    """Governance: many lost runs settled in bulk statements; {'requeued': [...], 'failed': [...]}.

    Each run gets run_lost's outcome with the same compare-and-set, but per
    tick, not per run: one guarded UPDATE re-queues every run with attempts
    left and one fails every run whose attempts are spent, each row guarded by
    what governance read (RUNNING, the worker's token, the stale heartbeat,
    the attempt), so a worker whose heartbeat resumed keeps its run. A failed
    run's aftermath (breaker, backfill window, downstream) follows per run;
    the audit entries go in one INSERT; signals go out after commit. If the
    bulk path raises, it is rolled back and every run is settled on its own
    (run_lost, a savepoint each), so one run's failing end never rolls back
    another's.
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
                outcome = run_lost(run=run, now=now, why=_lost_why(run))
            except Exception:  # one run's failing end must not roll back the others'
                log.exception("could not settle lost run %s", run.pk)
                continue
            if outcome in out:
                out[outcome].append(run.pk)
    return out


# what runs_lost changes on a run in memory (restored if the bulk path rolls back)
_LOST_FIELDS = ("status", "attempt", "started_at", "admitted_at", "heartbeat_at", "dispatch_token", "worker_id",
                "reason", "finished_at")


def _lost_why(run: Run) -> str:
    beat = f"{run.heartbeat_at:%H:%M:%S} UTC" if run.heartbeat_at else "its start"
    return f"worker lost: no heartbeat from {run.worker_id or 'its worker'} since {beat}"


def _runs_lost_bulk(runs: list[Run], *, now: datetime) -> dict[str, list[int]]:
    columns = [("id", "id"), ("token", "dispatch_token"), ("beat", "heartbeat_at"), ("attempt", "attempt"),
               ("reason", "reason")]
    guard = (f"t.status = %s AND t.dispatch_token = v.token AND {bulk.same('t.heartbeat_at', 'v.beat')} "
             "AND t.attempt = v.attempt")
    why = {run.pk: _lost_why(run) for run in runs}
    spare = [run for run in runs if run.attempt < run.max_attempts]
    spent = [run for run in runs if run.attempt >= run.max_attempts]
    reasons = {run.pk: f"{why[run.pk]}; re-queued (attempt {run.attempt + 1}/{run.max_attempts})"[:500] for run in spare}
    reasons.update({run.pk: f"{why[run.pk]} (attempt {run.attempt}/{run.max_attempts})"[:500] for run in spent})
    requeued = bulk.cas_update(
        Run, columns=columns, rows=[(r.pk, r.dispatch_token, r.heartbeat_at, r.attempt, reasons[r.pk]) for r in spare],
        assign=("status = %s, attempt = v.attempt + 1, started_at = NULL, admitted_at = NULL, heartbeat_at = NULL, "
                "dispatch_token = '', worker_id = '', reason = v.reason"),
        assign_params=[S.QUEUED], guard=guard, guard_params=[S.RUNNING],
    )
    failed = bulk.cas_update(
        Run, columns=[*columns, ("finished_at", "finished_at")],
        rows=[(r.pk, r.dispatch_token, r.heartbeat_at, r.attempt, reasons[r.pk], now) for r in spent],
        assign="status = %s, finished_at = v.finished_at, reason = v.reason",
        assign_params=[S.FAILED], guard=guard, guard_params=[S.RUNNING],
    )
    runs_ended(S.FAILED, failed)
    entries = []
    for run in runs:
        if run.pk not in requeued and run.pk not in failed:
            continue  # its worker came back, or someone else settled it first
        worker = run.worker_id
        if run.pk in requeued:
            set_fields(run, status=S.QUEUED, attempt=run.attempt + 1, started_at=None, admitted_at=None, heartbeat_at=None,
                 dispatch_token="", worker_id="", reason=reasons[run.pk])
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


# --- inside the final transaction -----------------------------------------------

BARE_FIELDS = frozenset({"heartbeat_at", "rows_loaded"})


def _only_the_cas(e: Ending, children: dict[int, list[int]]) -> bool:
    """A success whose end is the compare-and-set alone: nothing follows it (see `_after_final`).

    A live run, no watermark, admitted while its breaker was closed (so not a
    test run: the one breaker statement of `_succeed_together` zeroes the count
    of each breaker still closed), no downstream schedule: the watermark,
    backfill and propagation steps would each do nothing.
    """
    run, schedule = e.run, e.run.schedule
    return (e.status == S.SUCCEEDED and not e.stopped and e.loaded is None and run.backfill_id is None and e.token is not None
            and set(e.fields or ()) <= BARE_FIELDS and not children.get(run.schedule_id)
            and schedule.breaker_status == BreakerStatus.CLOSED)


def _succeed_together(endings: list[Ending]) -> dict[int, str]:
    """Bare successes (`_only_the_cas`) in one compare-and-set statement (`bulk.cas_update`); run id ->
    SUCCEEDED, or 'discarded' when someone else changed the run first (a cancel, a lost-run re-queue)."""
    rows = [(e.run.pk, e.token, e.now, (e.fields or {}).get("heartbeat_at", e.now), (e.fields or {}).get("rows_loaded"))
            for e in endings]
    done = bulk.cas_update(
        Run, columns=[("id", "id"), ("token", "dispatch_token"), ("finished", "finished_at"), ("beat", "heartbeat_at"),
                      ("loaded", "rows_loaded")], rows=rows,
        assign=("status = %s, reason = '', finished_at = v.finished, heartbeat_at = v.beat, "
                "rows_loaded = COALESCE(v.loaded, t.rows_loaded)"),
        assign_params=[S.SUCCEEDED],
        # a run asked to stop meanwhile is left to the per-run path, which writes the stop's outcome instead
        guard="t.status = %s AND t.dispatch_token = v.token AND t.stop_requested_at IS NULL", guard_params=[S.RUNNING],
    )
    runs_ended(S.SUCCEEDED, done)
    out: dict[int, str] = {}
    for e in endings:
        if e.run.pk not in done:
            continue  # cancelled, lost or asked to stop meanwhile: runs_finish takes it on its own
        set_fields(e.run, status=S.SUCCEEDED, reason="", finished_at=e.now, **(e.fields or {}))
        lineage_run_ended(run=e.run, old=S.RUNNING, now=e.now)
        send_after_commit(e.run, S.SUCCEEDED, S.RUNNING)
        out[e.run.pk] = S.SUCCEEDED
    outcomes_record(e.run for e in endings if e.run.pk in out)
    if out:
        breaker_successes(schedule_ids=sorted({e.run.schedule_id for e in endings if e.run.pk in out}))
    return out


def _finish(*, run: Run, status: str, now: datetime, reason: str = "", token: str | None = None,
            fields: dict[str, Any] | None = None, blocked_by: Schedule | None = None, loaded: Loaded | None = None,
            actor: Any = None, audit_action: str = "", children: dict[int, list[int]] | None = None,
            stopped: bool = False, retryable: bool = False, unstarted: bool = False) -> bool:
    """The body of `run_finish`, inside the caller's transaction (or savepoint)."""
    before = run.status
    extra: dict[str, Any] = {"dispatch_token": token} if token is not None else {}
    if unstarted:
        extra["started_at__isnull"] = True
    verdict = token is not None and not stopped and before == S.RUNNING
    if verdict:
        extra["stop_requested_at__isnull"] = True  # a stop asked meanwhile outranks the code's own verdict
    values = dict(fields or {})
    values["reason"] = reason[:500]
    if blocked_by is not None:
        values["blocked_by"] = blocked_by
    if status == S.FAILED and retryable and before == S.RUNNING and token is not None and run.attempt < run.max_attempts:
        return _retry_later(run, token=token, now=now, reason=reason, fields=values, stopped=stopped)
    if not finalize(run, new=status, now=now, extra_filter=extra, **values):
        if verdict:
            return _finish_stopped_instead(run, token=token, now=now, fields=fields, children=children)
        return False
    if status == S.SUCCEEDED and loaded is not None and run.backfill_id is None:
        watermark_advance_on_success(run, loaded, now=now)
    _after_final(run, now=now, children=children)
    if audit_action:
        audit_record(actor=actor, action=audit_action, target=run, before={"status": before},
                     after={"status": status}, reason=reason, at=now)
    return True


def _finish_stopped_instead(run: Run, *, token: str, now: datetime, fields: dict[str, Any] | None,
                            children: dict[int, list[int]] | None) -> bool:
    """A worker's verdict lost to a stop request that arrived after its last heartbeat: the stop's outcome."""
    asked = (Run.objects.filter(pk=run.pk, status=S.RUNNING, dispatch_token=token, stop_requested_at__isnull=False)
             .values("stop_kind", "stop_reason", "stop_requested_at").first())
    if asked is None:
        return False  # someone else (governance, a person) changed the run first
    set_fields(run, **asked)
    status, reason = stop_outcome(kind=asked["stop_kind"], reason=asked["stop_reason"])
    kept = {k: v for k, v in (fields or {}).items() if k in ("heartbeat_at", "exit_code", "error")}
    return _finish(run=run, status=status, now=now, reason=reason, token=token, fields=kept, children=children,
                   stopped=True, retryable=asked["stop_kind"] == StopKind.TIMEOUT)


def _retry_later(run: Run, *, token: str, now: datetime, reason: str, fields: dict[str, Any], stopped: bool) -> bool:
    """A failed attempt (a command's exit, a timeout) with attempts left: the run is queued again after back-off.

    The attempt counts against the run's one budget (max_attempts), as a lost
    worker's re-queue does; the breaker counts only the run's final failure.
    """
    attempt = run.attempt + 1
    policy = RetryPolicy(max_attempts=max(2, run.max_attempts), initial_delay=run.schedule.retry_initial_delay,
                         backoff=run.schedule.retry_backoff, max_delay=run.schedule.retry_max_delay,
                         jitter=run.schedule.retry_jitter)
    delay = policy.delay(run.attempt)
    why = f"{reason}; re-queued (attempt {attempt}/{run.max_attempts}, in {delay:.1f} s)"[:500]
    guard = {} if stopped else {"stop_requested_at__isnull": True}
    kept = {k: v for k, v in fields.items() if k in ("error", "exit_code")}
    changed = Run.objects.filter(pk=run.pk, status=S.RUNNING, dispatch_token=token, **guard).update(
        status=S.QUEUED, attempt=attempt, started_at=None, admitted_at=None, heartbeat_at=None, dispatch_token="",
        worker_id="", reason=why, not_before=now + timedelta(seconds=delay), stop_requested_at=None, stop_kind="",
        stop_reason="", **kept)
    if not changed:
        if not stopped:
            return _finish_stopped_instead(run, token=token, now=now, fields=fields, children=None)
        return False
    set_fields(run, status=S.QUEUED, attempt=attempt, started_at=None, admitted_at=None, heartbeat_at=None,
         dispatch_token="", worker_id="", reason=why, not_before=now + timedelta(seconds=delay),
         stop_requested_at=None, stop_kind="", stop_reason="", **kept)
    send_after_commit(run, S.QUEUED, S.RUNNING)
    audit_record(actor="worker", action="run.retry", target=run, before={"status": S.RUNNING},
                 after={"status": S.QUEUED, "attempt": attempt}, reason=reason[:500], at=now)
    return True


def _after_final(run: Run, *, now: datetime, children: dict[int, list[int]] | None = None) -> None:
    """Breaker, backfill progress, downstream propagation: what follows a run's final status."""
    if run.status in (S.SUCCEEDED, S.FAILED):
        breaker_on_result(schedule_id=run.schedule_id, run=run, succeeded=run.status == S.SUCCEEDED, now=now)
    else:
        # a test run that ends without a verdict must not keep the breaker half-open forever
        breaker_trial_released(schedule_id=run.schedule_id, run_id=run.pk, now=now)
    if run.backfill_id is not None:
        backfill_window_done(run, now=now)
        return  # backfill windows never drive the live dependency graph
    if run.status == S.CANCELLED or not run.propagate:
        return  # a person stopped it, or re-ran just this one: downstreams neither start nor block
    propagate(run, now=now, children=children)


__all__ = ["Ending", "run_cancel", "run_finish", "run_lost", "run_stop_request", "run_stop_settled", "runs_finish",
           "runs_lost", "stop_outcome"]
