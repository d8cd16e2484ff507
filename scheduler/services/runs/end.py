"""The end of a run: the one place a run's end is written.

An end is a value, `Ending`: its kind (scheduler/core/ends.py: the code's verdict, a stop by kind, a lost worker,
a refusal before the start), the status a verdict or refusal brings, and what goes with it. `_write` is the one
function that writes it: one compare-and-set, guarded by the table of which end wins over which
(`core.ends.WINS`). The row may hold only a stop request the end does not lose to; when it holds a stronger one
(a person's cancel that arrived while a timeout was still local, say), that request's end is written instead.
Nothing else decides how a run ends: no flag, no guard built elsewhere.

What `core.ends.plan` makes of the end decides the rest, in the same transaction:

1. a final status: the watermark advance (a live run's success), the breaker's count, backfill window progress or
   downstream propagation (`_after_final`), the tally and latest outcomes (transitions.finalize), the signals after
   commit;
2. back to the queue (a retry after back-off, a lost worker's re-queue, a cluster's stop): the one set of fields of
   `models.requeue_fields`, the attempt spent or not as the plan says.

Stop requests live in runs/stop.py, a lost worker's end in runs/lost.py; both write through `_write`. Only
runs/downstream.py besides writes a final status (it blocks the dependents of a run ended here; a test checks it).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from scheduler.core import RetryPolicy
from scheduler.core.ends import NO_STOP, EndKind, Next, Plan, plan, prevailing, yields_to
from scheduler.models import BreakerStatus, Run, RunStatus, Schedule, requeue_fields
from scheduler.services.common import bulk
from scheduler.services.common.audit import audit_record
from scheduler.services.history.backfill_progress import backfill_window_done
from scheduler.services.history.outcomes import outcomes_batch, outcomes_record
from scheduler.services.history.tally import runs_ended
from scheduler.services.integrations.lineage import lineage_batch, lineage_run_ended
from scheduler.services.runs.breakers import breaker_on_result, breaker_successes, breaker_trial_released
from scheduler.services.runs.downstream import children_of, propagate
from scheduler.services.runs.transitions import finalize, send_after_commit, set_fields
from scheduler.services.runs.watermarks import Loaded, watermark_advance_on_success

log = logging.getLogger(__name__)
S = RunStatus

# what a run keeps of its end when it goes back to the queue, or when a stop's end replaces its verdict
KEPT_ON_REQUEUE = ("error", "exit_code")
KEPT_ON_STOP = ("heartbeat_at", "exit_code", "error", "window_low", "window_high")


@dataclass
class Ending:
    """One run's end, as data: the kind, the status a verdict or refusal brings, and what goes with it."""

    run: Run
    now: datetime
    kind: str = EndKind.VERDICT  # core.ends.EndKind
    status: str = ""  # a verdict's or a refusal's own status; a stop's or a lost worker's follows from its kind
    reason: str = ""
    token: str | None = None  # the dispatch token of the worker that ends it (or that governance judged lost)
    fields: dict[str, Any] = field(default_factory=dict)  # error, exit code, rows, report, window, heartbeat
    loaded: Loaded | None = None  # what a live run read, for the watermark
    retryable: bool = False  # a failed verdict its target may try again (a command's exit): part of the verdict
    blocked_by: Schedule | None = None
    actor: Any = None  # who ends it, with `audit_action`, for an audited end (a person, governance)
    audit_action: str = ""


def run_end(ending: Ending, *, then: Callable[[], Any] | None = None) -> bool:
    """Write `ending` in its own transaction; False when someone else changed the run first (not an error).

    `then()` adds its caller's part to a written end in the same transaction (a worker's: the log, the next
    window)."""
    with transaction.atomic(), outcomes_batch():  # then() inside: the outcome rows stay the last locks taken
        done = _write(ending, children=None)
        if done and then is not None:
            then()
        return done


def run_finish(*, run: Run, status: str, now: datetime, reason: str = "", token: str | None = None,
               fields: dict[str, Any] | None = None, loaded: Loaded | None = None, retryable: bool = False,
               blocked_by: Schedule | None = None, actor: Any = None, audit_action: str = "",
               then: Callable[[], Any] | None = None) -> bool:
    """`run_end` of a status: the code's verdict when a worker's `token` comes with it, else a refusal before the
    start (a cancel, for CANCELLED). The kind follows from who ends it; nothing else is a choice."""
    if token is not None:
        kind = EndKind.VERDICT
    else:
        kind = EndKind.CANCEL if status == S.CANCELLED else EndKind.REFUSED
    return run_end(Ending(run=run, now=now, kind=kind, status=status, reason=reason, token=token,
                          fields=dict(fields or {}), loaded=loaded, retryable=retryable, blocked_by=blocked_by,
                          actor=actor, audit_action=audit_action), then=then)


def runs_end(endings: list[Ending]) -> dict[int, str]:
    """A worker's batch of ends in one transaction, each in its own savepoint.

    A run whose end raises is rolled back to its savepoint alone and stays RUNNING (its heartbeat stops, so
    governance re-queues it as lost); the others still commit. Downstream schedules are looked up once for the
    batch. Bare successes (`_bare`) go in one statement. Returns run id -> the new status, 'discarded' (someone
    else changed the run first) or 'error'.
    """
    out: dict[int, str] = {}
    if not endings:
        return out
    children = children_of({e.run.schedule_id for e in endings})
    # the batch's lineage events go in one INSERT at the end of its transaction (none at all with lineage off)
    with transaction.atomic(), lineage_batch(), outcomes_batch():
        bare = [e for e in endings if _bare(e, children)]
        # a schedule with another kind of end in the batch keeps its runs' order (a failure, then a success)
        bare_ids = {e.run.pk for e in bare}
        ordered = {e.run.schedule_id for e in endings if e.run.pk not in bare_ids}
        bare = [e for e in bare if e.run.schedule_id not in ordered]
        if len(bare) > 1 and bulk.supported():
            try:
                with transaction.atomic(), lineage_batch(), outcomes_batch():
                    out.update(_succeed_together(bare))
            except Exception:  # the one statement failed: each run goes its own way below
                log.exception("could not finish %d runs together; finishing them one by one", len(bare))
        for e in endings:
            if e.run.pk in out:
                continue
            try:
                with transaction.atomic(), lineage_batch(), outcomes_batch():
                    done = _write(e, children=children)
            except Exception:  # one run's failing end must not roll back the others'
                log.exception("could not finish run %s; left to governance", e.run.pk)
                out[e.run.pk] = "error"
                continue
            out[e.run.pk] = e.run.status if done else "discarded"
    return out


# --- the one writer ---------------------------------------------------------------

def _guard(e: Ending, kind: str) -> dict[str, Any]:
    """The compare-and-set's condition for an end of `kind` (beyond the run's id and status as read)."""
    run = e.run
    guard: dict[str, Any] = {}
    if e.token is not None:
        guard["dispatch_token"] = e.token
    if run.status == S.RUNNING:
        guard["stop_kind__in"] = yields_to(kind)  # the table: never over a stop request that outranks this end
        if e.token is None:
            guard["started_at__isnull"] = True  # without a worker's token, only a run no worker has begun
    if e.kind == EndKind.LOST:
        # what governance judged: a worker whose heartbeat resumed, or which spent an attempt since, keeps its run
        guard["attempt"] = run.attempt
        if run.heartbeat_at is None:
            guard["heartbeat_at__isnull"] = True
        else:
            guard["heartbeat_at"] = run.heartbeat_at
    return guard


def _write(e: Ending, *, children: dict[int, list[int]] | None) -> bool:
    """Write `e` (inside the caller's transaction): one compare-and-set; the end that stands, its aftermath."""
    run, old = e.run, e.run.status
    kind = prevailing(e.kind, run.stop_kind or NO_STOP) if old == S.RUNNING else e.kind
    the_plan = plan(kind, status=e.status, retryable=e.retryable, attempts_left=run.attempt < run.max_attempts)
    reason = _reason(e, kind)
    worker = run.worker_id
    guard = _guard(e, kind)
    if the_plan.next == Next.FINAL:
        fields = dict(e.fields) if kind == e.kind else {k: v for k, v in e.fields.items() if k in KEPT_ON_STOP}
        if the_plan.status == S.FAILED and kind == EndKind.TIMEOUT:
            fields.setdefault("error", reason)
        if e.blocked_by is not None:
            fields["blocked_by"] = e.blocked_by
        done = finalize(run, new=the_plan.status, now=e.now, extra_filter=guard, reason=_final_reason(reason, kind,
                        run), **fields)
    else:
        done = _requeue(run, the_plan, guard=guard, now=e.now, reason=reason,
                        kept={k: v for k, v in e.fields.items() if k in KEPT_ON_REQUEUE})
    if not done:
        return _lost_the_race(e, kind, children=children)
    if the_plan.next == Next.FINAL:
        if run.status == S.SUCCEEDED and e.loaded is not None and run.backfill_id is None:
            watermark_advance_on_success(run, e.loaded, now=e.now)
        _after_final(run, now=e.now, children=children)
    _audit(e, kind, the_plan, old=old, worker=worker, reason=reason)
    return True


def _lost_the_race(e: Ending, kind: str, *, children: dict[int, list[int]] | None) -> bool:
    """The compare-and-set changed nothing. If the run is still this end's to write but its row holds a stop
    request that outranks it (asked after the run was read), that request's end is written instead."""
    run = e.run
    if run.status != S.RUNNING:
        return False
    identity = {key: value for key, value in _guard(e, kind).items() if key != "stop_kind__in"}
    asked = (Run.objects.filter(pk=run.pk, status=S.RUNNING, **identity)
             .values("stop_kind", "stop_reason", "stop_requested_at").first())
    if asked is None or prevailing(kind, asked["stop_kind"]) == kind:
        return False  # someone else (governance, a person, another worker) changed the run first
    set_fields(run, **asked)
    return _write(e, children=children)  # the rank only rises: at most one step per kind of stop


def _reason(e: Ending, kind: str) -> str:
    """The run's reason for an end of `kind`: the end's own, or the stop request's when that request stands."""
    if kind == e.kind:
        return e.reason or _DEFAULT_REASON.get(kind, "")
    return e.run.stop_reason or _DEFAULT_REASON.get(kind, "")


_DEFAULT_REASON = {EndKind.CANCEL: "cancelled", EndKind.CANCEL_OTHER: "cancelled", EndKind.TERMINATE: "cancelled",
                   EndKind.TIMEOUT: "timed out", EndKind.SHUTDOWN: "the cluster stopped",
                   EndKind.FENCE: "fenced: its worker lost the database", EndKind.LOST: "worker lost"}


def _final_reason(reason: str, kind: str, run: Run) -> str:
    if kind == EndKind.LOST:  # a lost worker's last attempt: say which it was
        return f"{reason} (attempt {run.attempt}/{run.max_attempts})"[:500]
    return reason[:500]


def _requeue(run: Run, the_plan: Plan, *, guard: dict[str, Any], now: datetime, reason: str,
             kept: dict[str, Any]) -> bool:
    """Back to the queue (the one set of fields, `requeue_fields`): after back-off for a retry, at once for a lost
    worker, without spending the attempt for a cluster's stop."""
    not_before = None
    if the_plan.next == Next.REQUEUE_FREE:
        attempt = run.attempt
        why = f"{reason}; re-queued (attempt {attempt}/{run.max_attempts} not spent)"
    else:
        attempt = run.attempt + 1
        why = f"{reason}; re-queued (attempt {attempt}/{run.max_attempts}"
        if the_plan.next == Next.RETRY:
            delay = _retry_delay(run)
            not_before = now + timedelta(seconds=delay)
            why += f", in {delay:.1f} s"
        why += ")"
    fields = {**kept, **requeue_fields(reason=why, attempt=attempt, not_before=not_before)}
    if not Run.objects.filter(pk=run.pk, status=run.status, **guard).update(**fields):
        return False
    old = run.status
    set_fields(run, **fields)
    send_after_commit(run, S.QUEUED, old)
    return True


def _retry_delay(run: Run) -> float:
    """The back-off before the next attempt; the attempt counts against the run's one budget (max_attempts)."""
    schedule = run.schedule
    policy = RetryPolicy(max_attempts=max(2, run.max_attempts), initial_delay=schedule.retry_initial_delay,
                         backoff=schedule.retry_backoff, max_delay=schedule.retry_max_delay,
                         jitter=schedule.retry_jitter)
    return policy.delay(run.attempt)


def _audit(e: Ending, kind: str, the_plan: Plan, *, old: str, worker: str, reason: str) -> None:
    run = e.run
    if e.kind == EndKind.LOST:
        if kind == EndKind.LOST:
            outcome = "failed" if the_plan.next == Next.FINAL else "requeued"
            audit_record(actor=e.actor or "governance", action=f"run.worker_lost.{outcome}", target=run,
                         before={"status": old, "worker": worker}, after={"status": run.status},
                         reason=e.reason[:500], at=e.now)
        else:  # its worker was gone and the row held a stop request: the stop's end
            audit_record(actor=e.actor or "governance", action="run.stop.settled", target=run,
                         before={"status": "STOPPING"}, after={"status": run.status}, reason=e.reason[:500],
                         at=e.now)
    elif the_plan.next == Next.RETRY:
        audit_record(actor="worker", action="run.retry", target=run, before={"status": old},
                     after={"status": S.QUEUED, "attempt": run.attempt}, reason=reason[:500], at=e.now)
    elif the_plan.next == Next.REQUEUE_FREE:  # a cluster's stop: the worker's end or the cluster's own
        audit_record(actor=e.actor or "worker", action=e.audit_action or "run.requeue.shutdown", target=run,
                     before={"status": old, "worker": worker}, after={"status": run.status, "attempt": run.attempt},
                     reason=reason[:500], at=e.now)
    elif e.audit_action:
        audit_record(actor=e.actor, action=e.audit_action, target=run, before={"status": old},
                     after={"status": run.status}, reason=reason[:500], at=e.now)


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


# --- a batch's bare successes in one statement ------------------------------------

BARE_FIELDS = frozenset({"heartbeat_at", "rows_loaded"})


def _bare(e: Ending, children: dict[int, list[int]]) -> bool:
    """A success whose end is the compare-and-set alone: nothing follows it (see `_after_final`).

    A live run, no watermark, admitted while its breaker was closed (so not a test run: the one breaker statement
    of `_succeed_together` zeroes the count of each breaker still closed), no downstream schedule.
    """
    run, schedule = e.run, e.run.schedule
    return (e.kind == EndKind.VERDICT and e.status == S.SUCCEEDED and e.loaded is None and run.backfill_id is None
            and e.token is not None and set(e.fields) <= BARE_FIELDS and not children.get(run.schedule_id)
            and schedule.breaker_status == BreakerStatus.CLOSED)


def _succeed_together(endings: list[Ending]) -> dict[int, str]:
    """Bare successes (`_bare`) in one compare-and-set statement, guarded by the same table as `_write`; run id ->
    SUCCEEDED for those written (the others go their own way: a stop asked meanwhile, a cancel, a lost worker)."""
    rows = [(e.run.pk, e.token, e.now, e.fields.get("heartbeat_at", e.now), e.fields.get("rows_loaded"))
            for e in endings]
    allowed = yields_to(EndKind.VERDICT)
    done = bulk.cas_update(
        Run, columns=[("id", "id"), ("token", "dispatch_token"), ("finished", "finished_at"), ("beat", "heartbeat_at"),
                      ("loaded", "rows_loaded")], rows=rows,
        assign=("status = %s, reason = '', finished_at = v.finished, heartbeat_at = v.beat, "
                "rows_loaded = COALESCE(v.loaded, t.rows_loaded)"),
        assign_params=[S.SUCCEEDED],
        guard=f"t.status = %s AND t.dispatch_token = v.token AND t.stop_kind IN ({', '.join(['%s'] * len(allowed))})",
        guard_params=[S.RUNNING, *allowed],
    )
    runs_ended(S.SUCCEEDED, done)
    out: dict[int, str] = {}
    for e in endings:
        if e.run.pk not in done:
            continue
        set_fields(e.run, status=S.SUCCEEDED, reason="", finished_at=e.now, **e.fields)
        lineage_run_ended(run=e.run, old=S.RUNNING, now=e.now)
        send_after_commit(e.run, S.SUCCEEDED, S.RUNNING)
        out[e.run.pk] = S.SUCCEEDED
    outcomes_record(e.run for e in endings if e.run.pk in out)
    if out:
        breaker_successes(schedule_ids=sorted({e.run.schedule_id for e in endings if e.run.pk in out}))
    return out


runs_finish = runs_end  # a worker's batch: the name its callers know


__all__ = ["Ending", "run_end", "run_finish", "runs_end", "runs_finish"]
