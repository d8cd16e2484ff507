"""A worker executes admitted runs: the claim, the window, the outcome (the target itself in targets.py, the
heartbeat in heartbeats.py).

`execute_run` takes one run; `execute_runs` a batch the dispatcher packed into
one broker message when the queue was deep (docs/semantics.md, "Batches"): one
load and one heartbeat for the batch, each run claimed as it begins, and the ends written together by
`finish.runs_finish` (each in its own savepoint), each within
ETL_BATCH_FLUSH_SECONDS of its end, even while a long neighbour runs (`BatchEnds`)."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from datetime import datetime
from typing import Any, Callable

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from scheduler import signals
from scheduler.core import RunReport, Window, compute_window
from scheduler.core.windows import reached_until
from scheduler.core.errors import PermanentError
from scheduler.core.stop import FENCE, TIMEOUT, RunStopped
from scheduler.models import Run, RunStatus, TargetKind
from scheduler.pipelines.context import RunContext
from scheduler.services.worker import supervisor
from scheduler.services.admission.backfills import backfill_on_run_started
from scheduler.services.admission.catchup import catchup_admit_next
from scheduler.services.worker.code_versions import run_code_or_hand_back
from scheduler.services.worker.commands import CommandFailed, command_mark
from scheduler.services.admission.dispatch import hand_off
from scheduler.services.cluster.heartbeats import HeartbeatPump, record_local_stop, worker_name
from scheduler.services.integrations.lineage import lineage_atomic, lineage_run_began
from scheduler.services.runs.end import Ending, run_finish, runs_finish, stop_outcome
from scheduler.services.runs.logs import captures_store, run_log_capture, run_start_notes, window_note
from scheduler.services.runs.queue import with_schedules
from scheduler.services.worker.targets import run_target
from scheduler.services.runs.watermarks import Loaded, decode_value, encode_value, watermark_config, watermark_state

log = logging.getLogger(__name__)
S = RunStatus


class NothingToRead(Exception):
    pass


def _window_for(run: Run, now: datetime):
    """(config, Window or None, capped) for the run: backfill windows are fixed, live ones computed."""
    config = watermark_config(run.schedule)
    if config is None:
        return None, None, False
    if run.window_low or run.window_high:
        return config, Window(decode_value(config, run.window_low), decode_value(config, run.window_high)), False
    state = watermark_state(run.schedule, config)
    window = compute_window(config, state, now)
    if window is None:
        if reached_until(config, state):
            raise NothingToRead(f"the watermark reached its until bound ({encode_value(config.until)})")
        raise NothingToRead("no new data since the watermark")
    capped = config.is_datetime and window.high < now - config.lag
    return config, window, capped


def execute_run(run_id: int, token: str, *, clock: Callable[[], datetime] = timezone.now) -> str:
    """Entry point of a worker. Returns the outcome status, or 'stale' for an old message.

    A run that loaded a window cut by max_window, or a backfill's window, has the next window admitted at once
    (catchup.py); this worker runs it next, with no trip through the broker, while the message is inside its budget
    (as a batch is); past the budget the window goes to the broker. The outcome returned is the first run's.
    """
    began = time.monotonic()
    budget = min(settings.ETL_BATCH_BUDGET_SECONDS, settings.Q_TIMEOUT / 10)
    following: list[Following] = []

    def in_budget() -> bool:
        return time.monotonic() - began <= budget

    outcome = _execute_lone(run_id, token, clock=clock, following=following, in_budget=in_budget)
    try:
        # a window begun already (claimed with the end before it) runs whatever the time
        while following and (following[-1][3] is not None or in_budget()):
            _execute_lone(*following.pop(), clock=clock, following=following, in_budget=in_budget)
    finally:
        # admitted and not begun here: to the broker (else governance resends them as lost); one begun already
        # (only if this worker failed in between) is governance's, as a lost run
        unclaimed = [(pk, token) for pk, token, _, begun in following if begun is None]
        if unclaimed:
            hand_off(unclaimed)
    return outcome


# the next window a worker runs after the last: (run id, token, the run as admitted, when it was claimed or None)
Following = tuple[int, str, Run, "datetime | None"]


def _execute_lone(run_id: int, token: str, admitted: Run | None = None, begun: datetime | None = None, *,
                  clock: Callable[[], datetime], following: list[Following], in_budget: Callable[[], bool]) -> str:
    """One run; `admitted`: the run as this worker admitted it (catchup.py), with its schedule, so not read again;
    `begun`: when it was claimed, with the end of the window before it."""
    if not connection.in_atomic_block and admitted is None:
        # a worker starts each task with a healthy connection; inside a caller's
        # transaction (tests, the benchmark) the connection is not ours to close
        close_old_connections()
    if begun is not None and admitted is not None:
        run, now = admitted, begun
    else:
        now = clock()
        with lineage_atomic():  # the claim and its START in one transaction (none at all with lineage off)
            run = _begin(run_id, token, admitted, now=now)
            if run is None:
                return "stale"  # cancelled, re-dispatched or already taken by another delivery
    backfill_on_run_started(run)
    transaction.on_commit(lambda: signals.run_started.send(sender=Run, run=run))
    pump = HeartbeatPump.get()
    pump.register(run_id, token)
    with run_log_capture(run, clock=clock) as logs:
        run_start_notes(logs, run, now=now)
        try:
            return _execute_claimed(run, token, now=now, clock=clock, logs=logs, settle=lambda ending: (
                _settle_and_follow(ending, following, clock, logs, in_budget)))
        finally:
            pump.unregister(run_id)


def _begin(run_id: int, token: str, admitted: Run | None, *, now: datetime) -> Run | None:
    """Claim the run for this worker and record its START (lineage); the run, or None when it is not ours (stale)."""
    me = worker_name()
    # read before the claim (one read, as after it before): the claim's UPDATE then writes the code it runs
    run = admitted or Run.objects.select_related("schedule").filter(pk=run_id).first()
    code = run_code_or_hand_back(run, token=token, now=now, cluster=me)  # None: gone, or unknown to this code
    if code is None or not _claim(run_id, token, now=now, worker=me, code=code):
        return None
    run.started_at, run.heartbeat_at, run.worker_id, run.code_version = now, now, me, code
    lineage_run_began(run=run, now=now)
    return run


def _settle_and_follow(ending: Ending | None, following: list[Following], clock: Callable[[], datetime], logs,
                       in_budget: Callable[[], bool]) -> str:
    """A lone run's end, its log and, after a capped or backfill window's success, the next window's admission, in
    one transaction: one commit where there were three, and the next window is never seen queued by the dispatch
    loop (which would send it to the broker and another worker). A next live window handed over at once
    (dispatch.admit_slice) is claimed in it too, while the message is inside its budget."""
    # inside a caller's transaction (tests, in-process benchmarks) nothing is admitted: the caller drives
    catching_up = ending is not None and ending.status == S.SUCCEEDED and (
        ending.run.backfill_id is not None or (ending.loaded is not None and ending.loaded.capped)) and (
        settings.ETL_CATCHUP_ON_WORKER and not connection.in_atomic_block)
    kept: list[tuple[int, str, Run]] = []  # filled as the end's transaction commits (or at once: a hand-over)
    begun: datetime | None = None

    def with_the_end() -> None:  # in the end's transaction, once it is written (finish.run_finish's `then`)
        nonlocal kept, begun
        logs.finish_from(ending.run)  # the end as written: no read of it
        if ending.run.status == S.SUCCEEDED and catching_up:
            kept = catchup_admit_next(run=ending.run, holder=worker_name(), now=clock())
            if kept and in_budget():  # handed over already, not when this commits: begun here as well
                pk, token, nxt = kept[0]
                begun = clock()
                if _begin(pk, token, nxt, now=begun) is None:
                    begun = None

    outcome = _settle(ending, then=with_the_end)
    following.extend((pk, token, nxt, begun) for pk, token, nxt in kept)
    return outcome


def execute_runs(pairs: list[tuple[int, str]], *, clock: Callable[[], datetime] = timezone.now) -> dict[int, str]:
    """Entry point of a worker for a batch of (run id, token): run id -> outcome status, 'stale', 'discarded'.

    The runs wait their turn unclaimed (the batch's heartbeat keeps them alive); each is claimed as it begins.
    So a worker that dies mid-batch costs an attempt only to the run it was running: the runs it had not begun
    are still unclaimed, and governance sends them again as lost messages.
    """
    if len(pairs) == 1:
        run_id, token = pairs[0]
        return {run_id: execute_run(run_id, token, clock=clock)}
    if not connection.in_atomic_block:
        close_old_connections()
    tokens = dict(pairs)
    out = {run_id: "stale" for run_id in tokens}
    runs = _waiting(tokens)
    if not runs:
        return out
    pump, me = HeartbeatPump.get(), worker_name()
    for run in runs:
        pump.register(run.pk, run.dispatch_token)
    # inside a caller's transaction (tests, the benchmark) another thread could not see the batch's rows
    ends = BatchEnds(pump, out, timer=not connection.in_atomic_block)
    budget = min(settings.ETL_BATCH_BUDGET_SECONDS, settings.Q_TIMEOUT / 10)
    try:
        for index, run in enumerate(runs):
            if index and time.monotonic() - ends.began > budget:
                # past the budget: the runs not begun go back to the broker (their tokens still hold), so the
                # batch stays far inside django-q2's timeout and a long run does not hold the rest behind it
                _give_back(runs[index:], pump=pump)
                break
            now = clock()
            code = run_code_or_hand_back(run, token=run.dispatch_token, now=now, cluster=me)
            with lineage_atomic():
                if code is None or not _claim(run.pk, run.dispatch_token, now=now, worker=me, code=code):
                    pump.unregister(run.pk)  # cancelled or re-dispatched while it waited, or handed back: stale
                    continue
                run.started_at, run.heartbeat_at, run.worker_id, run.code_version = now, now, me, code
                lineage_run_began(run=run, now=now)
            backfill_on_run_started(run)
            transaction.on_commit(lambda run=run: signals.run_started.send(sender=Run, run=run))
            try:
                with run_log_capture(run, clock=clock, store=False) as logs:
                    run_start_notes(logs, run, now=now)
                    # before_end: the supervisor is about to end this process for a run that ignored its stop;
                    # the ends of the runs that finished before it are written first, or governance would
                    # re-queue them as lost and run them again
                    ending = _execute_claimed(run, run.dispatch_token, now=now, clock=clock, logs=logs,
                                              settle=lambda e: e, before_end=ends.write_quietly)
            except Exception:
                # left RUNNING without a heartbeat: governance re-queues it as lost
                log.exception("run %s of a batch stopped on an unexpected error", run.pk)
                pump.unregister(run.pk)
                continue
            if ending is None:  # fenced: this worker lost the database; governance settles the run
                pump.unregister(run.pk)
                out[run.pk] = "fenced"
                continue
            # a write that fails (the database is gone) stops the batch: what was not written is
            # governance's to re-queue, rather than more results that could not be written either
            ends.add(ending, logs)
        ends.write()
    except BaseException:
        ends.write_quietly()  # stopped by something else than a failed write: keep what finished
        raise
    finally:
        ends.close()
        for run in runs:  # no heartbeat for a run whose end was not written: governance takes it
            pump.unregister(run.pk)
    return out


class BatchEnds:
    """The finished runs of a batch, written together, and each within ETL_BATCH_FLUSH_SECONDS of its end.

    The batch's own thread writes them as the next run ends, once the interval has passed; while a long run
    goes on, a timer thread (its own database connection) writes them when the interval is up, so a finished
    run never waits for its neighbour: its downstreams start, and a worker lost meanwhile does not cost it a
    second execution. One lock keeps the two from writing at once.
    """

    def __init__(self, pump: "HeartbeatPump", out: dict[int, str], *, timer: bool) -> None:
        self.pump, self.out, self.use_timer = pump, out, timer
        self.lock = threading.RLock()
        self.pending: list[tuple[Ending, Any]] = []
        self.began = self.flushed_at = time.monotonic()
        self.timer: threading.Timer | None = None
        self.closed = False

    def add(self, ending: Ending, logs: Any) -> None:
        with self.lock:
            self.pending.append((ending, logs))
            if time.monotonic() - self.flushed_at >= settings.ETL_BATCH_FLUSH_SECONDS:
                self.write()
            elif self.use_timer and self.timer is None:
                wait = max(0.0, settings.ETL_BATCH_FLUSH_SECONDS - (time.monotonic() - self.flushed_at))
                self.timer = threading.Timer(wait, self._on_timer)
                self.timer.daemon = True
                self.timer.start()

    def write(self) -> None:
        """Write what finished (raises when the write fails)."""
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            written, self.pending = self.pending, []
            self.flushed_at = time.monotonic()
            if written:
                self.out.update(_flush(written, self.pump))

    def write_quietly(self) -> None:
        try:
            self.write()
        except Exception:
            log.exception("could not write the ends of a batch's finished runs")

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

    def _on_timer(self) -> None:
        try:
            with self.lock:
                self.timer = None
                if not self.closed:
                    self.write_quietly()
        finally:
            connection.close()  # this thread's own connection


def _claim(run_id: int, token: str, *, now: datetime, worker: str, code: str = "") -> bool:
    """Take a run for this worker as it begins: only a run still waiting for this very message (a cancelled,
    re-dispatched or already started one is stale). `code`: the code version it runs (code_versions.py)."""
    began = time.monotonic()
    claimed = bool(Run.objects.filter(pk=run_id, status=S.RUNNING, dispatch_token=token, started_at__isnull=True)
                   .update(started_at=now, heartbeat_at=now, worker_id=worker, code_version=code[:200]))
    if claimed:
        # the claim wrote the run's heartbeat: the fence counts from it, not from the last beat of an earlier run
        # (an idle worker beats nothing, and its next run was fenced at once)
        supervisor.Supervisor.get().beat_ok(began)
    return claimed


def _waiting(tokens: dict[int, str]) -> list[Run]:
    """A batch's runs that still wait for this message, in the message's order, with their schedules (one read)."""
    loaded = {r.pk: r for r in with_schedules(list(Run.objects.filter(pk__in=list(tokens))))}
    return [loaded[pk] for pk in tokens if pk in loaded and loaded[pk].status == S.RUNNING
            and loaded[pk].dispatch_token == tokens[pk] and loaded[pk].started_at is None]


def _give_back(runs: list[Run], *, pump: "HeartbeatPump") -> None:
    """Runs of a batch this worker did not begin: still unclaimed, so they go to the broker again as they are."""
    for run in runs:
        pump.unregister(run.pk)
    hand_off([(run.pk, run.dispatch_token) for run in runs])
    log.info("batch past its %s s budget: %d run(s) sent again", settings.ETL_BATCH_BUDGET_SECONDS, len(runs))


def _flush(pending: list[tuple[Ending, Any]], pump: "HeartbeatPump") -> dict[int, str]:
    """The finished runs of a batch: their ends in one transaction, then their logs in one insert."""
    try:
        out = runs_finish(endings=[ending for ending, _ in pending])
    finally:
        for ending, _ in pending:
            pump.unregister(ending.run.pk)
    for ending, _ in pending:
        if out.get(ending.run.pk) == "discarded":
            log.info("run %s was changed by someone else (cancelled or lost); result discarded", ending.run.pk)
    try:
        captures_store([logs for _, logs in pending])
    except Exception:
        log.warning("could not store the logs of a batch", exc_info=True)
    return out


def _execute_claimed(run: Run, token: str, *, now: datetime, clock, logs, settle,
                     before_end: Callable[[], None] | None = None) -> Any:
    """The claimed run to its end; an error anywhere (the window's math, a bad definition, the pipeline) fails it
    at once with the real error, rather than leaving it RUNNING for governance to call lost."""
    def settle_once(ending: Ending | None) -> Any:
        # writing the end is not "outside the pipeline": if that fails, the end is not written (governance's)
        try:
            return settle(ending)
        except Exception as exc:
            raise _EndNotWritten() from exc

    try:
        return _execute_guarded(run, token, now=now, clock=clock, logs=logs, settle=settle_once,
                                before_end=before_end)
    except _EndNotWritten as failed:
        raise failed.__cause__ from None
    except Exception as exc:
        logs.note("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), level="ERROR")
        return _report_failure(run, token, exc, clock=clock, settle=settle)


class _EndNotWritten(Exception):
    """The run's end could not be written (raised from `settle`): not an error of the run's own."""


def _execute_guarded(run: Run, token: str, *, now: datetime, clock, logs, settle,
                     before_end: Callable[[], None] | None = None) -> Any:
    try:
        config, window, capped = _window_for(run, now)
    except NothingToRead as exc:
        logs.note(str(exc))
        return _report(run, token, new=S.SKIPPED, reason=str(exc), clock=clock, settle=settle)
    window_note(logs, window)
    ctx = RunContext(
        run_id=run.pk, schedule=run.schedule.name, window=window, params=dict(run.params or {}),
        logical_time=run.logical_time, attempt=run.attempt,
        watermark_column=config.column if config else None, backfill=run.backfill_id,
    )
    timeout = run.schedule.timeout_seconds
    if timeout:
        logs.note(f"timeout {timeout} s")
    last_words = _last_words(logs, clock=clock, before_end=before_end)
    with supervisor.watch(run.pk, token, timeout=timeout, on_force=last_words) as control:
        try:
            rows, max_value, report, exit_code = run_target(run, token, ctx, clock, control=control, logs=logs)
            if run.schedule.target_kind == TargetKind.COMMAND and config is not None:
                window, max_value = command_mark(config, window, max_value)
        except RunStopped as stopped:
            return _report_stopped(run, token, stopped.kind, stopped.reason, control=control, logs=logs,
                                   clock=clock, settle=settle)
        except CommandFailed as exc:
            # a dbt run's failure carries what dbt ran (its nodes) and dbt's own words (services/dbt.py)
            reason = str(exc)[:500]
            text = getattr(exc, "error", "") or str(exc)
            error = f"{text}\n--- last lines ---\n{exc.tail}" if exc.tail else text
            return _report(run, token, new=S.FAILED, reason=reason, error=error[-8000:], exit_code=exc.exit_code,
                           rows=getattr(exc, "rows", None), report=getattr(exc, "report", None),
                           retryable=True, clock=clock, settle=settle)
        except Exception as exc:
            logs.note("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), level="ERROR")
            return _report_failure(run, token, exc, clock=clock, settle=settle)
        if control.requested is not None:
            # the code returned after it was asked to stop: nothing it did since counts as the run's result
            request = control.requested
            return _report_stopped(run, token, request.kind, request.reason, control=control, logs=logs,
                                   clock=clock, settle=settle, exit_code=exit_code)
    if report is not None and not report.ok:
        failed = report.failed[0] if report.failed else (report.blocked[0] if report.blocked else "?")
        reason = next((r.reason for r in report.records if r.task_id == failed and r.reason), "")
        return _report(run, token, new=S.FAILED, reason=f"node '{failed}' failed: {reason}"[:500],
                       error=reason, rows=rows, report=report, clock=clock, settle=settle)
    return _report(run, token, new=S.SUCCEEDED, rows=rows, config=config, window=window, capped=capped,
                   max_value=max_value, report=report, exit_code=exit_code, clock=clock, settle=settle)


def _last_words(logs, *, clock, before_end: Callable[[], None] | None = None
                ) -> Callable[[supervisor.RunControl, str], None]:
    """What the supervisor calls before it ends the process of a run that ignored its stop: a timeout no beat has
    written yet is written (so the reaper can settle the run at once), `before_end` (a batch writes the ends of
    its finished runs), and the note is stored."""
    def note(control: supervisor.RunControl, text: str) -> None:
        steps = [lambda: record_local_stop(control, now=clock()), *([before_end] if before_end else [])]
        for step in steps:  # each on its own: one that fails must not cost the others
            try:
                step()
            except Exception:
                log.warning("run %s: a last write before the process is ended failed", control.run_id, exc_info=True)
        logs.note(text, level="ERROR", force=True)
        logs.save()
    return note


def _report_stopped(run: Run, token: str, kind: str, reason: str, *, control, logs, clock, settle,
                    exit_code: int | None = None) -> Any:
    """The end of a run whose code stopped on a request: CANCELLED, or FAILED for a timeout (retried while
    attempts last). A fenced run's end is not written: its worker lost the database, and governance settles it."""
    elapsed = clock() - run.started_at if run.started_at else None
    took = f" {elapsed.total_seconds():.1f} s after it began" if elapsed is not None else ""
    logs.note(f"stopped ({kind}){took}: {reason}", level="WARNING", force=True)
    if kind == FENCE:
        return settle(None)
    status, why = stop_outcome(kind=kind, reason=reason)
    return _report(run, token, new=status, reason=why, error=why if status == S.FAILED else "", exit_code=exit_code,
                   stopped=True, retryable=kind == TIMEOUT, clock=clock, settle=settle)


def _report_failure(run: Run, token: str, exc: BaseException, *, clock, settle) -> Any:
    permanent = isinstance(exc, PermanentError) or getattr(exc, "permanent", False)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:]
    reason = f"{type(exc).__name__}: {exc}"[:500]
    if permanent:
        reason = f"permanent error, not retried: {reason}"[:500]
    return _report(run, token, new=S.FAILED, reason=reason, error=text, clock=clock, settle=settle)


def _report(run: Run, token: str, *, new: str, clock, settle, reason: str = "", error: str = "",
            rows: int | None = None, config=None, window=None, capped: bool = False, max_value: Any = None,
            report: RunReport | None = None, exit_code: int | None = None, stopped: bool = False,
            retryable: bool = False) -> Any:
    """The run's end as an `Ending`, handed to `settle` (finish it now, or keep it for the batch's flush)."""
    now = clock()
    fields: dict[str, Any] = {"heartbeat_at": now}
    if error:
        fields["error"] = error
    if exit_code is not None:
        fields["exit_code"] = exit_code
    if rows is not None:
        fields["rows_loaded"] = rows
    if report is not None:
        fields["report"] = report.to_dict()
    if window is not None:
        fields["window_low"], fields["window_high"] = encode_value(window.low), encode_value(window.high)
    loaded = Loaded(config, window, max_value, capped) if config is not None and new == S.SUCCEEDED else None
    return settle(Ending(run=run, status=new, now=now, reason=reason, token=token, fields=fields, loaded=loaded,
                         stopped=stopped, retryable=retryable))


def _settle(ending: Ending | None, then: Callable[[], None] | None = None) -> str:
    """A lone run's end, written at once (None: a fenced run, whose end is governance's to write); `then` in its
    transaction once it is written."""
    if ending is None:
        return "fenced"
    e = ending
    if not run_finish(run=e.run, status=e.status, now=e.now, reason=e.reason, token=e.token, fields=e.fields,
                      loaded=e.loaded, stopped=e.stopped, retryable=e.retryable, then=then):
        log.info("run %s was changed by someone else (cancelled or lost); result discarded", e.run.pk)
        return "discarded"
    return e.run.status


__all__ = ["execute_run", "execute_runs"]
