"""Control of the runs a worker process executes: stop requests, timeouts, forced stops, fencing, child processes.

The one module that sends a signal or ends a process (a test checks it). It
never touches the database: a worker cut off from the database must still
stop its runs on time.

* Each run a worker executes gets a `RunControl` (`watch`): the run's
  `StopToken`, made the current token of the worker thread, its timeout and,
  for a command, its process.
* The heartbeat pump (services/heartbeats.py) reads stop requests from the
  database each beat and hands them to `request`; the run's own timeout and a
  workflow node's are found here, by the `Supervisor` thread.
* A request reaches the code at once: Python code sees `cancelled()` /
  `check()`; a command's whole process group gets SIGTERM. After
  ETL_CANCEL_GRACE_SECONDS (none for terminate) a command's group gets
  SIGKILL, and a Python pipeline that ignored the request has its worker
  process ended (django-q2 starts a new one; the run's end is then written by
  the cluster's reaper, `dead_worker_pids`, or by governance).
* A worker process ended by force cannot clean up after its command: the
  cluster's main process is a child subreaper as well, so the orphans come to
  it, and `reap_orphans` (its main loop) ends them before the run's retry.
* Fencing: when the pump could not renew the heartbeat for
  ETL_FENCE_SECONDS, every run of the process is stopped (a short grace,
  then by force), so it has stopped before governance may call it lost
  (ETL_STUCK_SECONDS) and start another copy.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from django.conf import settings

from scheduler.core import stop
from scheduler.core.stop import CANCEL, CANCEL_OTHER, FENCE, SHUTDOWN, TERMINATE, TIMEOUT, StopToken
from scheduler.core.timing import LAST_WORDS_SECONDS, SUPERVISOR_TICK, fence_grace
from scheduler.services.common.singleton import PerProcessThread
from scheduler.services.worker.processes import (  # noqa: F401  re-exported: the supervisor's face for processes
    _child_pids, _children, _die_with_parent, _group_gone, _subreaper, become_subreaper, kill_run_processes, pid_alive,
    reap_group, reap_orphans, signal_group)

log = logging.getLogger(__name__)
TICK = SUPERVISOR_TICK  # seconds between the supervisor's looks: the forced-stop precision (core/timing.py)


@dataclass(eq=False)
class RunControl:
    """One executing run as its worker process controls it."""

    run_id: int
    token: str
    stop: StopToken
    grace: float
    proc: subprocess.Popen | None = None
    recorded: bool = False  # the stop request is in the database (the pump writes local ones: a timeout)
    termed: bool = False
    killed: bool = False
    # last words before the process is ended: (this control, the note); the worker writes what the database lacks
    on_force: Callable[["RunControl", str], None] | None = None
    children: list[int] = field(default_factory=list)  # this process's children before the command began

    @property
    def requested(self):
        return self.stop.requested

    def grace_for(self, kind: str) -> float:
        if kind == TERMINATE:
            return 0.0
        if kind == FENCE:
            # stopped, by force if need be, before governance may call the run lost
            return fence_grace(grace=self.grace, fence=settings.ETL_FENCE_SECONDS, stuck=settings.ETL_STUCK_SECONDS)
        return self.grace


class Supervisor(PerProcessThread):
    """One daemon thread per worker process: timeouts, grace periods and fencing of the runs it executes."""

    def __init__(self) -> None:
        super().__init__(name="etl-supervisor")
        self.controls: dict[int, RunControl] = {}
        self.lock = threading.Lock()
        self.last_beat_ok = time.monotonic()
        # per run: when a write last touched its row for this worker (its claim, a beat); a beat that touched
        # other runs proves nothing for this one
        self.contact: dict[int, float] = {}
        self.end_process: Callable[[], None] = _end_this_process

    # --- the pump's side ----------------------------------------------------
    def beat_ok(self, at: float, run_ids=()) -> None:
        """A write begun at monotonic `at` touched the rows of `run_ids` (a claim, a beat): the database hears this
        worker for those runs."""
        self.last_beat_ok = max(self.last_beat_ok, at)
        for run_id in run_ids:
            self.contact[run_id] = max(self.contact.get(run_id, at), at)

    def contact_lost(self, run_ids, why: str) -> None:
        """A beat touched none of these runs' rows: they are no longer this worker's (governance gave them away),
        so their code stops at once, and a run whose code has not begun never begins it (`watch`)."""
        for run_id in run_ids:
            self.contact[run_id] = float("-inf")
            self.request(run_id, FENCE, why, recorded=False)

    def silent_for(self, run_id: int, now: float, started: float) -> float:
        """How long this worker has not been heard for `run_id`: since the last write that touched its row, or,
        for a run it holds no such record of, since the later of its last beat and the run's start."""
        last = self.contact.get(run_id)
        return now - (last if last is not None else max(self.last_beat_ok, started))

    def active(self) -> list[RunControl]:
        with self.lock:
            return list(self.controls.values())

    def request(self, run_id: int, kind: str, reason: str, *, recorded: bool = True) -> bool:
        """A stop request for a run this process executes (read from the database, or found here)."""
        with self.lock:
            control = self.controls.get(run_id)
        if control is None:
            return False
        if recorded:
            control.recorded = True
        first = control.stop.request(kind, reason)
        if not first and kind == TERMINATE and control.requested.kind in (CANCEL, CANCEL_OTHER, SHUTDOWN, TIMEOUT):
            control.stop.request_ = stop.StopRequest(TERMINATE, reason, time.monotonic())  # escalate: no grace
            first = True
        if first:
            log.info("run %s asked to stop (%s): %s", run_id, kind, reason)
            self.enforce(control)
        return first

    # --- the thread ---------------------------------------------------------
    def run(self) -> None:
        while True:
            time.sleep(TICK)
            try:
                self.tick(time.monotonic())
            except Exception:  # the supervisor must outlive any one run's trouble
                log.exception("supervisor tick failed")

    def tick(self, now: float) -> None:
        controls = self.active()
        if not controls:
            return
        for control in controls:
            fenced = self.silent_for(control.run_id, now, control.stop.started) >= settings.ETL_FENCE_SECONDS
            if fenced and control.requested is None:
                control.stop.request(FENCE, f"fenced: no heartbeat written for {settings.ETL_FENCE_SECONDS:g} s "
                                            "(the worker lost the database); stopped before governance may re-queue it")
                log.warning("run %s fenced: the worker could not write its heartbeat", control.run_id)
            control.stop.expire()
            if control.requested is not None:
                self.enforce(control, now=now)

    def enforce(self, control: RunControl, *, now: float | None = None) -> None:
        """Signal a stopping run's code: SIGTERM at once, SIGKILL (or the process's end) past the grace."""
        request = control.requested
        if request is None:
            return
        now = time.monotonic() if now is None else now
        overdue = now - request.at >= control.grace_for(request.kind)
        if control.proc is not None:
            if not control.termed:
                control.termed = True
                signal_group(control.proc, signal.SIGTERM)
            if overdue and not control.killed:
                control.killed = True
                signal_group(control.proc, signal.SIGKILL)
            return
        if overdue and not control.killed:
            # Python code that ignored the request: only ending the process stops it
            control.killed = True
            note = (f"did not stop within {control.grace_for(request.kind):g} s of the request ({request.kind}); "
                    "the worker process is ended")
            log.error("run %s %s", control.run_id, note)
            # Not for a fence: that worker cannot reach the database, so nothing of the last words (a batch's
            # finished ends, the note) could be stored, and waiting LAST_WORDS_SECONDS for them would spend the
            # (STUCK - FENCE) / 2 the fence's grace leaves before governance may re-queue the run, and more
            # (tests/reliability/test_fencing.py, "stubborn")
            if control.on_force is not None and request.kind != FENCE:
                # in a thread of its own, bounded: a worker whose database is slow must still end on time
                last = threading.Thread(target=_quietly, args=(control.on_force, control, note), daemon=True)
                last.start()
                last.join(timeout=LAST_WORDS_SECONDS)
            self.end_process()


_end_lock = threading.Lock()


def _quietly(func: Callable[[RunControl, str], None], control: RunControl, note: str) -> None:
    try:
        func(control, note)
    except Exception:
        log.warning("could not store the last note before ending the process", exc_info=True)


def _end_this_process() -> None:
    with _end_lock:  # the run's code must not outlive this line
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def watch(run_id: int, token: str, *, timeout: float | None,
          on_force: Callable[[RunControl, str], None] | None = None) -> Iterator[RunControl]:
    """Control one run while the block executes it in this thread: its token is the thread's current one."""
    supervisor = Supervisor.get()
    control = RunControl(run_id=run_id, token=token, stop=StopToken(timeout=timeout),
                         grace=settings.ETL_CANCEL_GRACE_SECONDS, on_force=on_force)
    with supervisor.lock:
        supervisor.controls[run_id] = control
    if supervisor.silent_for(run_id, time.monotonic(), control.stop.started) >= settings.ETL_FENCE_SECONDS:
        # a worker stalled between its claim and here: its code must not begin on a run it may have lost
        control.stop.request(FENCE, "fenced before its code began: nothing this worker wrote has touched the run "
                                    f"for {settings.ETL_FENCE_SECONDS:g} s")
    try:
        with stop.activate(control.stop):
            yield control
    finally:
        with supervisor.lock:
            supervisor.controls.pop(run_id, None)
            supervisor.contact.pop(run_id, None)


# --- child processes --------------------------------------------------------------

def spawn(argv: list[str], *, cwd: str | None, env: dict[str, str], control: RunControl) -> subprocess.Popen:
    """Start a command in its own session and process group, under `control` (no shell unless argv names one)."""
    control.children = _child_pids()  # not the command's: never touched
    # while the command runs, its orphans (a daemon that double-forked) are re-parented to this process, so
    # reap_group can find and end them; off again afterwards, so other orphans go to init as before
    _subreaper(True)
    proc = subprocess.Popen(
        argv, cwd=cwd or None, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, close_fds=True, preexec_fn=_die_with_parent,
    )
    control.proc = proc
    if control.requested is not None:  # asked to stop while it was being started
        Supervisor.get().enforce(control)
    return proc


__all__ = [
    "RunControl", "Supervisor", "become_subreaper", "kill_run_processes", "pid_alive", "reap_group", "reap_orphans",
    "signal_group", "spawn", "watch",
]
