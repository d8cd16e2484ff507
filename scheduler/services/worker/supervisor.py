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

import ctypes
import logging
import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings

from scheduler.core import stop
from scheduler.core.stop import CANCEL, FENCE, TERMINATE, TIMEOUT, StopToken

log = logging.getLogger(__name__)
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child calls it between fork and exec
except (OSError, AttributeError):
    _prctl = None
TICK = 0.1  # seconds between the supervisor's looks: the forced-stop precision


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
            return min(self.grace, max(0.0, (settings.ETL_STUCK_SECONDS - settings.ETL_FENCE_SECONDS) / 2))
        return self.grace


class Supervisor(threading.Thread):
    """One daemon thread per worker process: timeouts, grace periods and fencing of the runs it executes."""

    _instance: "Supervisor | None" = None
    _guard = threading.Lock()

    def __init__(self) -> None:
        super().__init__(name="etl-supervisor", daemon=True)
        self.pid = os.getpid()
        self.controls: dict[int, RunControl] = {}
        self.lock = threading.Lock()
        self.last_beat_ok = time.monotonic()
        self.end_process: Callable[[], None] = _end_this_process

    @classmethod
    def get(cls) -> "Supervisor":
        # django-q2 forks its workers: a supervisor inherited from the parent has no thread here
        with cls._guard:
            if cls._instance is None or cls._instance.pid != os.getpid() or not cls._instance.is_alive():
                cls._instance = cls()
                cls._instance.start()
            return cls._instance

    # --- the pump's side ----------------------------------------------------
    def beat_ok(self, at: float) -> None:
        """The heartbeat begun at monotonic `at` was written: the database hears this worker."""
        self.last_beat_ok = max(self.last_beat_ok, at)

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
        if not first and kind == TERMINATE and control.requested.kind in (CANCEL, TIMEOUT):
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
            # silent since the later of the last written beat and the run's own start (an idle pump beats nothing)
            fenced = now - max(self.last_beat_ok, control.stop.started) >= settings.ETL_FENCE_SECONDS
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
LAST_WORDS_SECONDS = 2.0


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
    try:
        with stop.activate(control.stop):
            yield control
    finally:
        with supervisor.lock:
            supervisor.controls.pop(run_id, None)


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


def signal_group(proc: subprocess.Popen, signum: int) -> None:
    """Signal a command's whole process group (its pgid is its pid: start_new_session)."""
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def reap_group(control: RunControl, *, settle: float = 3.0) -> list[int]:
    """After a command's main process ended: kill what is left of its group and of its orphans; reap the zombies.

    Returns the pids that could not be ended (empty when none is left). The
    worker is a child subreaper, so an orphan of the command (even one that
    left the group with setsid) is re-parented here rather than to init, and
    is found as a child this process did not have before the command began.
    """
    proc = control.proc
    assert proc is not None
    if proc.returncode is None:
        signal_group(proc, signal.SIGKILL)
        proc.wait()
    signal_group(proc, signal.SIGKILL)  # whatever of the group outlived its leader
    known = set(control.children) | {proc.pid}
    deadline = time.monotonic() + settle
    while True:
        left = []
        for pid, state, ppid in _leftovers(proc.pid, known):
            if state == "Z":
                if ppid == os.getpid():
                    _reap(pid)
                continue  # a zombie of another parent is that parent's to reap
            _kill(pid)
            left.append(pid)
        if not left or time.monotonic() >= deadline:
            _subreaper(False)
            return left
        time.sleep(0.02)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _proc_stat(entry: Path) -> tuple[str, int, int] | None:
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: the fields follow the last ')'
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def _children() -> list[tuple[int, str, int]]:
    """(pid, state, pgrp) of this process's children."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(entry)) is not None and stat[1] == me:
            out.append((int(entry.name), stat[0], stat[2]))
    return out


def _child_pids() -> list[int]:
    """This process's children: from the kernel's list per thread when it has one, else by a scan of /proc."""
    own = _own_children()
    return own if own is not None else [pid for pid, _state, _pgrp in _children()]


def _own_children() -> list[int] | None:
    """The pids in /proc/self/task/<tid>/children (every thread's: an orphan re-parented to this subreaper may
    be any thread's child); None when the kernel does not offer the list (CONFIG_PROC_CHILDREN)."""
    pids: list[int] = []
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            pids.extend(int(pid) for pid in (task / "children").read_text().split())
        except FileNotFoundError:
            if task.exists():
                return None  # no such file for a live thread: the kernel does not keep the list
        except OSError:
            continue  # the thread ended while we looked
    return pids


def _group_gone(pgid: int) -> bool:
    """True when no process (not even a zombie) is left in the group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _leftovers(pgid: int, known: set[int]) -> list[tuple[int, str, int]]:
    """(pid, state, ppid) of processes in the group `pgid`, and of this process's children it did not have before
    the command (the command's orphans, re-parented here)."""
    me = os.getpid()
    if _group_gone(pgid):
        # The usual case (the command and its children ended with it): what is left can only be this process's
        # children (orphans come here: it is their subreaper), so its own list is enough; a scan of every
        # process's /proc/<pid>/stat cost 5-10 ms per command on a machine with ~100 processes.
        own = _own_children()
        if own is not None:
            found = []
            for pid in own:
                if pid not in known and (stat := _proc_stat(Path(f"/proc/{pid}"))) is not None:
                    found.append((pid, stat[0], stat[1]))
            return found
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or (stat := _proc_stat(entry)) is None:
            continue
        pid, (state, ppid, pgrp) = int(entry.name), stat
        if pgrp == pgid or (ppid == me and pid not in known):
            found.append((pid, state, ppid))
    return found


def _die_with_parent() -> None:
    """In the command's process, before exec: the kernel kills it if its worker dies (a SIGKILL, the OOM killer)."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def kill_run_processes(run_id: int) -> list[int]:
    """SIGKILL every process of this machine that runs for run `run_id` (its command and their descendants: they
    carry ETL_RUN_ID in their environment). For a run whose worker died, found by the reaper loop, including after
    the whole cluster was killed and started again: nothing of it may go on writing while governance starts another
    attempt. Returns the pids signalled."""
    marker = f"ETL_RUN_ID={run_id}".encode()
    me, hit = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            _kill(int(entry.name))
            hit.append(int(entry.name))
    return hit


def reap_orphans(*, keep: set[int]) -> list[int]:
    """In the cluster's main process (`become_subreaper`): kill and reap what is left of a dead worker's commands.

    A worker process ended by force (SIGKILL, the kernel's OOM killer) cannot
    clean up after its command: the command and its processes are re-parented
    to the nearest living subreaper, the cluster's main process, and would
    otherwise run on beside the retry governance starts. They are found as its
    children outside `keep` (the Sentinel) that run in a session other than its
    own (every command starts a session; the cluster's own processes share the
    main one). Returns the pids signalled.
    """
    session, ended = os.getsid(0), []
    for pid, state, _pgrp in _children():
        if pid in keep:
            continue
        try:
            if os.getsid(pid) == session:
                continue  # not a command's: the cluster's own
        except OSError:
            continue  # gone already
        if state != "Z":
            _kill(pid)
            ended.append(pid)
        _reap(pid)  # a killed one is reaped on a later call, once it is a zombie
    if ended:
        log.error("killed %s: processes of commands whose worker process died", ", ".join(map(str, ended)))
    return ended


def become_subreaper() -> None:
    """Orphans of this process's descendants are re-parented here (not to init), where `reap_orphans` finds them."""
    _subreaper(True)


def _subreaper(on: bool) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
    except (OSError, AttributeError):
        log.debug("prctl(PR_SET_CHILD_SUBREAPER) is not available; orphans go to init")


def pid_alive(pid: int) -> bool:
    """Whether a process of this machine is alive (a zombie counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


__all__ = [
    "RunControl", "Supervisor", "become_subreaper", "kill_run_processes", "pid_alive", "reap_group", "reap_orphans",
    "signal_group", "spawn", "watch",
]
