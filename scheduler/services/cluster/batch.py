"""A worker executes a batch of admitted runs that the dispatcher packed into one broker message when the queue was
deep (docs/semantics.md, "Batches"): one load and one heartbeat for the batch, each run claimed as it begins, and
the ends written together by `runs/end.runs_end` (each in its own savepoint), each within ETL_BATCH_FLUSH_SECONDS of
its end, even while a long neighbour runs (`BatchEnds`)."""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from scheduler import signals
from scheduler.models import Run, RunStatus
from scheduler.services.admission.backfills import backfill_on_run_started
from scheduler.services.admission.dispatch import hand_off
from scheduler.services.cluster.execution import _claim, _execute_claimed, execute_run
from scheduler.services.cluster.heartbeats import HeartbeatPump, worker_name
from scheduler.services.integrations.lineage import lineage_atomic, lineage_run_began
from scheduler.services.runs.end import Ending, runs_end
from scheduler.services.runs.logs import captures_store, root_level_for_runs, run_log_capture, run_start_notes
from scheduler.services.runs.queue import with_schedules
from scheduler.services.worker.code_versions import run_code_or_hand_back

log = logging.getLogger(__name__)
S = RunStatus


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
        with root_level_for_runs():  # once for the batch, not twice a run
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
        out = runs_end([ending for ending, _ in pending])
    finally:
        for ending, _ in pending:
            pump.unregister(ending.run.pk)
    for ending, _ in pending:
        if out.get(ending.run.pk) == "discarded":
            log.info("run %s was changed by someone else (cancelled or lost); result discarded", ending.run.pk)
    # the ends written are known as written: their closing notes need no read
    ended = {e.run.pk: e.run for e, _ in pending if out.get(e.run.pk) not in (None, "discarded", "error")}
    try:
        captures_store([logs for _, logs in pending], ended=ended)
    except Exception:
        log.warning("could not store the logs of a batch", exc_info=True)
    return out



__all__ = ["BatchEnds", "execute_runs"]
