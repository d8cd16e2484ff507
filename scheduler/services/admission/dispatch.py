"""The dispatch loop's work: fire due triggers, gate queued runs, hand them to workers."""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django_q.brokers import Broker, get_broker
from django_q.tasks import async_task
from django.db import connection, transaction
from django.db.models import CharField, Count, Exists, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Cast, Coalesce, Concat

from scheduler.core import next_allowed_start
from scheduler.core.overlap import SERIAL_POLICIES
from scheduler.models import BackfillStatus, BreakerStatus, Run, RunStatus, Schedule, TriggerKind, WorkloadClass
from scheduler.services.runs import dependencies
from scheduler.services.oversight.alerts import governance_watchdog
from scheduler.services.admission.backfills import backfill_pump
from scheduler.services.runs.breakers import breaker_admit, breaker_trial_released
from scheduler.services.admission.clusters import (run_wait_for_code, unknown_target_reason)
from scheduler.services.runs.end import run_finish
from scheduler.services.admission.firing import fire_due
from scheduler.services.runs.queue import run_transition, with_schedules
from scheduler.services.runs.waiting import waiting_in_turns

log = logging.getLogger(__name__)
S = RunStatus
MAX_ROUNDS = 4  # batches per tick when held-back runs filled a batch
# a person asking for a run (manual, a re-run, a re-run from failure) gets one, however fresh the last success
FRESHNESS_EXEMPT = (TriggerKind.MANUAL, TriggerKind.RERUN, TriggerKind.RETRY)


# --- gating -----------------------------------------------------------------

def _held_back(run: Run, *, now: datetime, running_watermarked: set[int], admitting: int = 0) -> str:
    """A reason to leave the run QUEUED this tick, or ''.

    `admitting`: runs of the same schedule chosen earlier in this tick, not yet written (they count as started now).
    """
    schedule = run.schedule
    if run.backfill_id is None and schedule.overlap in SERIAL_POLICIES and schedule.pk in running_watermarked:
        if schedule.watermark_config and not schedule.overlap_policy:
            return "previous run of this watermarked schedule is still running"
        return f"previous run of this schedule is still running (overlap policy {schedule.overlap})"
    if run.backfill_id is not None and run.backfill.status != BackfillStatus.ACTIVE:
        return f"backfill {run.backfill_id} {run.backfill.status.lower()}"
    if schedule.max_runs_per_minute:
        recent = list(
            Run.objects.filter(schedule_id=schedule.pk, admitted_at__gt=now - timedelta(seconds=60))
            .values_list("admitted_at", flat=True)
        ) + [now] * admitting
        until = next_allowed_start(recent, schedule.max_runs_per_minute, now)
        if until is not None:
            return f"rate limited until {until:%H:%M:%S} UTC ({schedule.max_runs_per_minute}/min)"
    return ""


def _fresh_reason(run: Run, *, now: datetime) -> str:
    schedule = run.schedule
    if not schedule.refresh_after_seconds or run.backfill_id is not None or run.trigger_kind in FRESHNESS_EXEMPT:
        return ""
    last = (
        Run.objects.filter(schedule_id=schedule.pk, status=S.SUCCEEDED, backfill__isnull=True)
        .order_by("-finished_at").values_list("finished_at", flat=True).first()
    )
    if last and now - last < timedelta(seconds=schedule.refresh_after_seconds):
        return (
            f"still fresh: last success {last:%Y-%m-%d %H:%M:%S} UTC, refresh_after {schedule.refresh_after_seconds} s"
        )
    return ""


def _dependency_verdicts(runs: list[Run]) -> dict[int, dependencies.Verdict]:
    """Verdicts of the live runs among `runs` whose schedule has upstreams: a few queries per schedule."""
    judged = [r for r in runs if r.backfill_id is None and getattr(r, "has_deps", True)]
    return dependencies.verdicts(dependencies.subjects_for(judged)) if judged else {}


def _gate_dependencies(run: Run, verdict: dependencies.Verdict | None, *, now: datetime) -> bool:
    """Apply the dependency verdict; True when the run may go on to admission."""
    if verdict is None or verdict.action == "admit":
        return True
    if verdict.action == "block":
        if run_finish(run=run, status=S.BLOCKED, now=now, reason=verdict.reason, blocked_by=verdict.upstream):
            dependencies.record_matches(run, verdict)
        return False
    if run.status == S.QUEUED and run_transition(run, new=S.WAITING, now=now, reason=verdict.reason[:500]):
        # the upstream runs it stands for, recorded as it starts to wait: a prune keeps them (history/prune.py)
        found = tuple(m for m in verdict.matches if m.run_id is not None)
        dependencies.record_matches(run, dataclasses.replace(verdict, matches=found))
    return False


def release_waiting(*, now: datetime) -> int:
    """WAITING runs whose condition now holds go back to the queue (or are blocked)."""
    moved = 0
    waiting = waiting_in_turns()
    verdicts = _dependency_verdicts(waiting)
    for run in waiting:
        verdict = verdicts.get(run.pk)
        if verdict is not None and verdict.action == "wait":
            continue
        with transaction.atomic():
            if _gate_dependencies(run, verdict, now=now):
                moved += run_transition(run, new=S.QUEUED, now=now, reason="")
    return moved


def admit_runs(*, now: datetime, holder: str, send: Callable[[list[tuple[int, str]]], None] | None = None,
               on_admitted: Callable[[list[Run]], None] | None = None) -> list[int]:
    """Admit queued runs in global priority / FIFO order without ever exceeding a class's limit.

    After commit the admitted (run id, token) pairs go to `send`, by default `hand_off` (the broker);
    `on_admitted` sees the admitted runs themselves (with their schedules) in the transaction.
    """
    has_queued = set(
        Run.objects.filter(status=S.QUEUED).values_list("workload_class_id", flat=True).distinct().order_by()
    )
    if not has_queued:
        return []
    with transaction.atomic():
        classes = WorkloadClass.objects.filter(pk__in=has_queued).order_by("pk")
        if connection.vendor == "postgresql":
            # Locking the class rows (in pk order, so two dispatchers cannot
            # deadlock) makes count-then-admit atomic across dispatchers;
            # SQLite's IMMEDIATE transactions already serialise writers.
            # NO KEY: a plain FOR UPDATE also blocks the FK check of every run
            # being inserted, and deadlocks with an insert that already holds
            # its schedule row (tests/reliability/test_cluster_churn.py).
            classes = classes.select_for_update(no_key=True)
        limits = {wc.pk: wc.concurrency_limit for wc in classes}
        running = dict(
            Run.objects.filter(status=S.RUNNING, workload_class_id__in=list(limits))
            .values_list("workload_class_id").annotate(n=Count("id")).order_by()
        )
        free = {pk: limit - running.get(pk, 0) for pk, limit in limits.items()}
        open_classes = [pk for pk, n in free.items() if n > 0]
        if not open_classes:
            return []
        # Read about twice the free slots (at least 16, at most ETL_DISPATCH_BATCH unless the free slots
        # alone are more): the query already leaves out what is held back, and a schedule that reaches a
        # hold-back during the tick is left out of the next round. Every row read is a Run built in Python.
        slots = sum(free[pk] for pk in open_classes)
        batch = max(slots, min(slots * 2, settings.ETL_DISPATCH_BATCH), 16)
        # Hold-backs are data the candidate query filters on, so one
        # schedule's backlog never hides another schedule's runs: schedules
        # at their rate limit, serial schedules with a run in flight, paused
        # backfills, retries in back-off. A schedule that reaches a hold-back
        # during the tick is left out of the next batch.
        serial_busy = _running_serial()
        rate_held = _rate_limited(now)
        seen: list[int] = []
        chosen: list[tuple[Run, dependencies.Verdict | None]] = []
        per_schedule: dict[int, int] = {}
        for _round in range(MAX_ROUNDS):
            candidates = with_schedules(list(_candidates(open_classes, now=now, serial_busy=serial_busy,
                                                         rate_held=rate_held, seen=seen)[:batch]))
            verdicts = _dependency_verdicts([run for run in candidates if run.has_deps])
            for run in candidates:
                if free[run.workload_class_id] <= 0:
                    continue
                if run.schedule_id in rate_held or (run.backfill_id is None and run.schedule_id in serial_busy):
                    continue  # held back earlier in this tick
                verdict = verdicts.get(run.pk)
                if _may_start(run, verdict, now=now, running_watermarked=serial_busy, rate_held=rate_held,
                              admitting=per_schedule.get(run.schedule_id, 0)):
                    free[run.workload_class_id] -= 1
                    per_schedule[run.schedule_id] = per_schedule.get(run.schedule_id, 0) + 1
                    chosen.append((run, verdict))
            seen.extend(run.pk for run in candidates)
            if len(candidates) < batch or all(free[pk] <= 0 for pk in open_classes):
                break
        admitted = _start(chosen, now=now, holder=holder, send=send or hand_off)
        if on_admitted is not None and admitted:
            started = {run_id for run_id, _ in admitted}
            on_admitted([run for run, _ in chosen if run.pk in started])
    return [run_id for run_id, _ in admitted]


def admit_slice(*, run: Run, now: datetime, holder: str) -> tuple[int, str] | None:
    """Admit `run`, the next slice of a catch-up queued by its schedule's last window in this transaction
    (catchup.py), when `admit_runs` certainly would; (run id, token), or None: ask `admit_runs`.

    One read instead of the gate's seven, for the common case only: nothing else queued in the run's class (so no
    run is ahead of it), a free slot there (the one its last window just gave back), its schedule with no
    upstream, no rate limit, no freshness rule for this kind of trigger, a closed breaker, and no other live run
    of it running. Anything else goes through the whole gate.
    """
    in_class = Run.objects.filter(workload_class_id=run.workload_class_id)
    found = (Schedule.objects.filter(pk=run.schedule_id, workload_class_id=run.workload_class_id,
                                     breaker_status=BreakerStatus.CLOSED, max_runs_per_minute=0)
             .select_related("workload_class")
             .annotate(upstream=Exists(Schedule.depends_on.through.objects.filter(from_schedule_id=OuterRef("pk"))),
                       busy=Exists(Run.objects.filter(schedule_id=OuterRef("pk"), status=S.RUNNING,
                                                      backfill__isnull=True)),
                       ahead=Exists(in_class.filter(status=S.QUEUED).exclude(pk=run.pk)),
                       running=Coalesce(Subquery(in_class.filter(status=S.RUNNING).order_by()
                                                 .values("workload_class_id").annotate(n=Count("id")).values("n")), 0)))
    if connection.vendor == "postgresql":
        found = found.select_for_update(no_key=True, of=("workload_class",))  # as admit_runs locks the class
    schedule = next(iter(found), None)
    if (schedule is None or schedule.upstream or schedule.ahead
            or schedule.running >= schedule.workload_class.concurrency_limit
            or (schedule.busy and schedule.overlap in SERIAL_POLICIES)
            or (schedule.refresh_after_seconds and run.trigger_kind not in FRESHNESS_EXEMPT)):
        return None
    token = f"{uuid.uuid4().hex[:16]}-{run.pk}"
    fields = {"status": S.RUNNING, "admitted_at": now, "heartbeat_at": now, "worker_id": holder[:200], "reason": "",
              "dispatch_token": token}
    if not Run.objects.filter(pk=run.pk, status=S.QUEUED, backfill__isnull=True).update(**fields):
        return None
    for name, value in fields.items():
        setattr(run, name, value)
    run.schedule = schedule  # as it is now, for the worker that runs it
    return run.pk, token


def _candidates(open_classes: list[int], *, now: datetime, serial_busy: set[int], rate_held: set[int],
                seen: list[int]):
    """Queued runs that may start now, in priority / FIFO order."""
    return (
        Run.objects.filter(status=S.QUEUED, workload_class_id__in=open_classes)
        .filter(Q(not_before__isnull=True) | Q(not_before__lte=now))
        .exclude(schedule_id__in=rate_held)
        .exclude(Q(schedule_id__in=serial_busy) & Q(backfill__isnull=True))
        .exclude(Q(backfill__isnull=False) & ~Q(backfill__status=BackfillStatus.ACTIVE))
        .exclude(pk__in=seen)
        .select_related("backfill")  # the schedules come once each (with_schedules), not once per run
        # one EXISTS per batch instead of one depends_on query per run
        .annotate(has_deps=Exists(Schedule.depends_on.through.objects.filter(from_schedule_id=OuterRef("schedule_id"))))
        .order_by("-priority", "queued_at", "id")
    )


def _rate_limited(now: datetime) -> set[int]:
    """Schedules that started their `max_runs_per_minute` within the last 60 s (one query)."""
    # most schedules have no rate limit: ask the runs only of those that do, each a range of run_sched_admitted_idx
    limited = list(Schedule.objects.filter(max_runs_per_minute__gt=0).values_list("pk", flat=True))
    if not limited:
        return set()
    return set(
        Run.objects.filter(schedule_id__in=limited, admitted_at__gt=now - timedelta(seconds=60))
        .values("schedule_id", "schedule__max_runs_per_minute").annotate(n=Count("id"))
        .filter(n__gte=F("schedule__max_runs_per_minute")).values_list("schedule_id", flat=True)
    )


def _running_serial() -> set[int]:
    """Schedules whose overlap policy runs one at a time and that have a live run RUNNING."""
    serial = Q(schedule__overlap_policy__in=SERIAL_POLICIES) | (
        Q(schedule__overlap_policy="") & ~Q(schedule__watermark_config={}))
    return set(Run.objects.filter(serial, status=S.RUNNING, backfill__isnull=True)
               .values_list("schedule_id", flat=True))


def _may_start(run: Run, verdict: dependencies.Verdict | None, *, now: datetime, running_watermarked: set[int],
               rate_held: set[int], admitting: int = 0) -> bool:
    """Gate one queued run (dependencies, freshness, hold-backs, breaker): True when it may start this tick.

    A run refused for good is made final here (BLOCKED, SKIPPED); a run that
    may start is marked in `running_watermarked` when its schedule runs one at
    a time, so a later run of the same schedule in this tick waits.
    """
    unknown = unknown_target_reason(run, now=now)
    if unknown:
        run_wait_for_code(run=run, why=unknown, now=now)
        return False
    if not _gate_dependencies(run, verdict, now=now):
        return False
    fresh = _fresh_reason(run, now=now)
    if fresh:
        run_finish(run=run, status=S.SKIPPED, now=now, reason=fresh)
        return False
    held = _held_back(run, now=now, running_watermarked=running_watermarked, admitting=admitting)
    if held:
        if held.startswith("rate limited"):
            rate_held.add(run.schedule_id)
        return False
    ok, why = breaker_admit(schedule_id=run.schedule_id, run=run, now=now)
    if not ok:
        run_finish(run=run, status=S.BLOCKED, now=now, reason=why, blocked_by=run.schedule)
        return False
    if run.schedule.overlap in SERIAL_POLICIES and run.backfill_id is None:
        running_watermarked.add(run.schedule_id)
    return True


def _start(chosen: list[tuple[Run, dependencies.Verdict | None]], *, now: datetime, holder: str,
           send: Callable[[list[tuple[int, str]]], None]) -> list[tuple[int, str]]:
    """Admit the tick's chosen runs with one statement; hand them to the workers after commit.

    Each run's dispatch token is the tick's token and its id, so one UPDATE
    writes them all. A run cancelled since it was read is not QUEUED any more
    and is left out by the same statement.
    """
    if not chosen:
        return []
    tick = uuid.uuid4().hex[:16]
    ids = [run.pk for run, _ in chosen]
    changed = Run.objects.filter(pk__in=ids, status=S.QUEUED).update(
        status=S.RUNNING, admitted_at=now, heartbeat_at=now, worker_id=holder[:200], reason="",
        dispatch_token=Concat(Value(f"{tick}-"), Cast("id", output_field=CharField())),
    )
    started = set(ids)
    if changed != len(ids):
        started = set(
            Run.objects.filter(pk__in=ids, dispatch_token__startswith=f"{tick}-").values_list("pk", flat=True)
        )
    admitted: list[tuple[int, str]] = []
    for run, verdict in chosen:
        if run.pk not in started:
            # cancelled under our feet: a trial slot taken for it must not stay taken
            breaker_trial_released(schedule_id=run.schedule_id, run_id=run.pk, now=now)
            continue
        token = f"{tick}-{run.pk}"
        run.status, run.admitted_at, run.heartbeat_at, run.dispatch_token = S.RUNNING, now, now, token
        run.worker_id, run.reason = holder[:200], ""
        if verdict is not None and verdict.matches:
            dependencies.record_matches(run, verdict)  # the upstream runs it was admitted on
        admitted.append((run.pk, token))
    transaction.on_commit(lambda: send(admitted))
    return admitted


# --- the hand-off to the broker -----------------------------------------------------

_broker: tuple[int, Broker] | None = None


def _shared_broker() -> Broker:
    """One broker client per process: django-q2's async_task builds one (a Redis connection pool) per call."""
    global _broker
    if _broker is None or _broker[0] != os.getpid():
        _broker = (os.getpid(), get_broker())
    return _broker[1]


def message_sizes(admitted: int, *, workers: int, most: int) -> int:
    """Runs per broker message: 1 unless a tick admits more runs than there are workers.

    Then ceil(admitted / workers), at most `most`: each worker gets a share of
    a deep queue in a few messages, and a lone run's latency is unchanged.
    """
    if admitted <= workers:
        return 1
    return max(1, min(most, math.ceil(admitted / max(1, workers))))


def hand_off(admitted: list[tuple[int, str]]) -> None:
    """After commit: the tick's admitted runs to the broker, over one connection, several runs a message when deep."""
    size = message_sizes(len(admitted), workers=int(settings.Q_CLUSTER.get("workers", 1)),
                         most=settings.ETL_RUN_BATCH_MAX)
    for i in range(0, len(admitted), size):
        message = admitted[i:i + size]
        if len(message) == 1:
            enqueue_execution(*message[0])
        else:
            enqueue_executions(message)


def enqueue_execution(run_id: int, token: str) -> None:
    async_task("scheduler.tasks.execute_run", run_id, token, task_name=f"run-{run_id}-{token[:8]}",
               timeout=settings.Q_TIMEOUT, broker=_shared_broker())


def enqueue_executions(pairs: list[tuple[int, str]]) -> None:
    """One message carrying several admitted runs; one worker executes them in turn (cluster/batch.py: execute_runs)."""
    first, token = pairs[0]
    async_task("scheduler.tasks.execute_runs", list(pairs), task_name=f"runs-{first}+{len(pairs) - 1}-{token[:8]}",
               timeout=settings.Q_TIMEOUT, broker=_shared_broker())


def run_redispatch(run: Run, *, now: datetime) -> bool:
    """Governance: an admitted run no worker picked up (a lost broker message) is sent again.

    A new token makes the old message, should it still arrive, stale.
    """
    token = uuid.uuid4().hex
    with transaction.atomic():
        changed = Run.objects.filter(
            pk=run.pk, status=S.RUNNING, started_at__isnull=True, dispatch_token=run.dispatch_token
        ).update(dispatch_token=token, heartbeat_at=now)
        if changed:
            transaction.on_commit(lambda: enqueue_execution(run.pk, token))
    return bool(changed)


def dispatch_tick(*, now: datetime, holder: str) -> dict:
    fired = fire_due(now=now, lookahead=timedelta(seconds=settings.ETL_DISPATCH_INTERVAL))
    pumped, released = backfill_pump(now=now), release_waiting(now=now)
    admitted = admit_runs(now=now, holder=holder)
    governance_watchdog(now=now)  # the governance loop cannot report its own death
    return {"fired": fired.runs, "pumped": pumped, "released": released, "admitted": len(admitted),
            "next_fire_at": fired.next_fire_at}
