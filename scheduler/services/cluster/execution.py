"""A worker executes admitted runs: the claim, the window, the outcome (the target itself in targets.py, the
heartbeat in heartbeats.py).

`execute_run` takes one run; cluster/batch.py's `execute_runs` a batch the dispatcher packed into one broker
message when the queue was deep (docs/semantics.md, "Batches")."""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from scheduler import signals
from scheduler.core import RunReport, Window, compute_window
from scheduler.core.windows import cut_by_max_window, reached_until
from scheduler.core.errors import PermanentError, failure_reason
from scheduler.core.ends import EndKind
from scheduler.core.stop import FENCE, RunStopped
from scheduler.models import Run, RunStatus, TargetKind, TriggerKind
from scheduler.pipelines.context import RunContext
from scheduler.services.worker import supervisor
from scheduler.services.admission.backfills import backfill_on_run_started
from scheduler.services.admission.catchup import catchup_admit_next
from scheduler.services.worker.code_versions import run_code_or_hand_back
from scheduler.services.worker.commands import CommandFailed, command_mark
from scheduler.services.admission.dispatch import hand_off
from scheduler.services.cluster.heartbeats import HeartbeatPump, record_local_stop, worker_name
from scheduler.services.integrations.lineage import lineage_atomic, lineage_run_began
from scheduler.services.runs.end import Ending, run_end
from scheduler.services.runs.logs import run_log_capture, run_start_notes, window_note
from scheduler.services.worker.targets import run_target
from scheduler.services.runs.watermarks import Loaded, decode_value, encode_value, watermark_config, watermark_state

log = logging.getLogger(__name__)
S = RunStatus
ERROR_CHARS = 8000  # a run's error keeps its reason and the end of its traceback


class NothingToRead(Exception):
    pass


def _window_for(run: Run, now: datetime):
    """(config, Window or None, capped) for the run: backfill windows are fixed, live ones computed."""
    config = watermark_config(run.schedule)
    if config is None:
        return None, None, False
    if run.window_low or run.window_high:
        # a fixed window: a backfill's, a re-run's (a replay: never a catch-up), or the one a retried attempt's first
        # attempt computed and stored, whose next slice still follows if max_window cut it
        window = Window(decode_value(config, run.window_low), decode_value(config, run.window_high))
        live = run.backfill_id is None and not _replays(run)
        return config, window, live and cut_by_max_window(config, window)
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


# The claim: one statement written out (the ORM built it in 0.4 ms of a no-op run's 2.4, issue 35). Its own
# transaction commits without waiting for its WAL flush on PostgreSQL (set in the statement itself: no round trip
# more). The flush was most of a commit's time there: 1.4-1.9 ms against 0.1-0.3 ms (docs/benchmarks.md). The claim is
# visible to every session at once, so a worker's death costs its run the attempt as before; only a crash of the
# PostgreSQL server itself can lose its last fraction of a second of claims, and such a run is sent again as a lost
# message, without spending an attempt (docs/semantics.md, "Retries and lost workers"). Inside a caller's
# transaction (lineage's START, a hand-over in the end's transaction) the caller's commit decides.
_CLAIM = (f'UPDATE "{Run._meta.db_table}" SET "started_at" = %s, "heartbeat_at" = %s, "worker_id" = %s, '
          f'"code_version" = %s WHERE "id" = %s AND "status" = \'{S.RUNNING.value}\' AND "dispatch_token" = %s '
          'AND "started_at" IS NULL')
_NO_FLUSH = " AND set_config('synchronous_commit', 'off', true) = 'off'"


def _claim(run_id: int, token: str, *, now: datetime, worker: str, code: str = "") -> bool:
    """Take a run for this worker as it begins: only a run still waiting for this very message (a cancelled,
    re-dispatched or already started one is stale). `code`: the code version it runs (code_versions.py)."""
    began = time.monotonic()
    no_flush = connection.vendor == "postgresql" and not connection.in_atomic_block
    at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM + _NO_FLUSH if no_flush else _CLAIM, [at, at, worker, code[:200], run_id, token])
        claimed = cursor.rowcount == 1
    if claimed:
        # the claim wrote the run's heartbeat: the fence counts from it, not from the last beat of an earlier run
        # (an idle worker beats nothing, and its next run was fenced at once)
        supervisor.Supervisor.get().beat_ok(began, [run_id])
    return claimed


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
        return _report(run, token, status=S.SKIPPED, reason=str(exc), clock=clock, settle=settle)
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
        if control.requested is not None:  # fenced before it began: the run may be another worker's by now
            request = control.requested
            return _report_stopped(run, token, request.kind, request.reason, control=control, logs=logs,
                                   clock=clock, settle=settle)
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
            return _report(run, token, status=S.FAILED, reason=reason, retryable=not getattr(exc, "permanent", False),
                           clock=clock, settle=settle,
                           facts=_Facts(error=error[-ERROR_CHARS:], exit_code=exc.exit_code,
                                        rows=getattr(exc, "rows", None), report=getattr(exc, "report", None),
                                        window=window))
        except Exception as exc:
            logs.note("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), level="ERROR")
            return _report_failure(run, token, exc, clock=clock, settle=settle, window=window)
        if control.requested is not None:
            # the code returned after it was asked to stop: nothing it did since counts as the run's result
            request = control.requested
            return _report_stopped(run, token, request.kind, request.reason, control=control, logs=logs,
                                   clock=clock, settle=settle, exit_code=exit_code)
    if report is not None and not report.ok:
        failed = report.failed[0] if report.failed else (report.blocked[0] if report.blocked else "?")
        reason = next((r.reason for r in report.records if r.task_id == failed and r.reason), "")
        cause, _, detail = reason.partition("\n")  # the node's cause first, as a pipeline's (core/errors.py)
        said = f"node '{failed}' failed"
        if cause:
            said = f"{cause}\n{said}" + (f"\n{detail}" if detail else "")
        return _report(run, token, status=S.FAILED, reason=said[:500], clock=clock,
                       settle=settle, facts=_Facts(error=reason, rows=rows, report=report, window=window))
    loaded = Loaded(config, window, max_value, capped, replay=_replays(run)) if config is not None else None
    return _report(run, token, status=S.SUCCEEDED, clock=clock, settle=settle, loaded=loaded,
                   facts=_Facts(rows=rows, report=report, exit_code=exit_code, window=window))


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
    """The end of a run whose code stopped on a request of `kind` (runs/end.py writes the end that stands: a
    stronger request asked meanwhile wins over the one this worker saw). A fenced run's end is not written: its
    worker lost the database, and governance settles it."""
    elapsed = clock() - run.started_at if run.started_at else None
    took = f" {elapsed.total_seconds():.1f} s after it began" if elapsed is not None else ""
    logs.note(f"stopped ({kind}){took}: {reason}", level="WARNING", force=True)
    if kind == FENCE:
        return settle(None)
    return _report(run, token, kind=EndKind(kind), reason=reason, clock=clock, settle=settle,
                   facts=_Facts(exit_code=exit_code))


def _report_failure(run: Run, token: str, exc: BaseException, *, clock, settle, window: Window | None = None) -> Any:
    """A failure's reason and error begin with the cause's own words, then where it happened (core/errors.py); the
    error adds the traceback (its end, where it was raised). The window it was reading stays on the run."""
    permanent = isinstance(exc, PermanentError) or getattr(exc, "permanent", False)
    reason = failure_reason(exc)
    if permanent:
        head, _, rest = reason.partition("\n")
        reason = f"{head} (permanent error, not retried)" + (f"\n{rest}" if rest else "")
        reason = reason[:500]
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    error = f"{reason}\n\n{trace[-(ERROR_CHARS - len(reason) - 2):]}"
    return _report(run, token, status=S.FAILED, reason=reason, clock=clock, settle=settle,
                   facts=_Facts(error=error, window=window))


@dataclass
class _Facts:
    """What a run's end brings besides its status: its error, exit code, rows, workflow report, the window read."""

    error: str = ""
    exit_code: int | None = None
    rows: int | None = None
    report: RunReport | None = None
    window: Window | None = None

    def fields(self, now: datetime) -> dict[str, Any]:
        fields: dict[str, Any] = {"heartbeat_at": now}
        if self.error:
            fields["error"] = self.error
        if self.exit_code is not None:
            fields["exit_code"] = self.exit_code
        if self.rows is not None:
            fields["rows_loaded"] = self.rows
        if self.report is not None:
            fields["report"] = self.report.to_dict()
        if self.window is not None:
            fields["window_low"], fields["window_high"] = encode_value(self.window.low), encode_value(self.window.high)
        return fields


def _report(run: Run, token: str, *, clock, settle, kind: str = EndKind.VERDICT, status: str = "", reason: str = "",
            retryable: bool = False, loaded: Loaded | None = None, facts: _Facts | None = None) -> Any:
    """The run's end as an `Ending`, handed to `settle` (written now, or kept for the batch's flush)."""
    now = clock()
    return settle(Ending(run=run, now=now, kind=kind, status=status, reason=reason, token=token,
                         fields=(facts or _Facts()).fields(now), loaded=loaded, retryable=retryable))


def _replays(run: Run) -> bool:
    """A re-run (or a resume from failure) reads the window of the run it repeats: a replay, not the live mark's."""
    return run.trigger_kind in (TriggerKind.RERUN, TriggerKind.RETRY)


def _settle(ending: Ending | None, then: Callable[[], None] | None = None) -> str:
    """A lone run's end, written at once (None: a fenced run, whose end is governance's to write); `then` in its
    transaction once it is written."""
    if ending is None:
        return "fenced"
    if not run_end(ending, then=then):
        log.info("run %s was changed by someone else (cancelled or lost); result discarded", ending.run.pk)
        return "discarded"
    return ending.run.status


__all__ = ["execute_run"]
