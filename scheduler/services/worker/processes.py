"""A run's child processes: signal a command's group, reap what it left, end a dead worker's leftovers.

The supervisor (supervisor.py) decides when; this module does it. With supervisor.py the only place that signals
or ends a process (a test checks it). It never touches the database.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("scheduler.services.worker.supervisor")
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child calls it between fork and exec
except (OSError, AttributeError):
    _prctl = None


def signal_group(proc: subprocess.Popen, signum: int) -> None:
    """Signal a command's whole process group (its pgid is its pid: start_new_session)."""
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def reap_group(control: Any, *, settle: float = 3.0) -> list[int]:
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


def descendants(root: int) -> list[int]:
    """Every process under `root` that has not ended (children, theirs, ...: by parent pid, whatever their group or
    session, so a command's own session is found too)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(entry)) is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def kill_tree(root: int, *, root_too: bool = True, rounds: int = 20) -> list[int]:
    """SIGKILL `root` (unless not `root_too`) and every process under it. The tree is frozen first (SIGSTOP, looked
    at again until no new process shows), so nothing forks between the look and the kill, and no orphan escapes to
    init as its parent dies. Returns the pids killed."""
    frozen: list[int] = []
    for _ in range(rounds):
        tree = [root, *descendants(root)] if root_too else descendants(root)
        new = [pid for pid in tree if pid not in frozen and pid_alive(pid)]
        if not new:
            break
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        frozen.extend(new)
    for pid in frozen:
        _kill(pid)
    return frozen


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def own_group_dying_with_parent(parent: int) -> None:
    """In a cluster's sentinel, first thing: a process group of its own, so a signal to the cluster's group (Ctrl-C,
    a process manager's SIGTERM) reaches only the cluster's main process, which stops the cluster in its own time
    (django-q2's sentinel and workers die at once on a SIGTERM); and the kernel kills it when that main process
    dies, as it kills the workers, monitor and pusher it forks when it dies: no part of a cluster outlives it."""
    os.setpgid(0, 0)
    _die_with_parent()
    if os.getppid() != parent:  # the main process died before the line above
        os._exit(1)
    me = os.getpid()
    os.register_at_fork(after_in_child=lambda: os.getppid() == me and _die_with_parent())


def exit_now(code: int) -> None:
    """End this process at once with `code`, its logs and output flushed: a stopped cluster or server whose work is
    done spends no more of its stop's bound on the interpreter's teardown (seconds for a Django process on a
    loaded machine)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


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


__all__ = ["become_subreaper", "descendants", "exit_now", "kill_run_processes", "kill_tree",
           "own_group_dying_with_parent", "pid_alive", "reap_group", "reap_orphans", "signal_group"]
