"""A stop that stops: SIGTERM to a `qcluster`'s process group, SIGINT to `serve`'s (Ctrl-C under `make run`).

A command run (a shell whose child sleeps) is running when the signal comes. The cluster gives it the grace, stops
it as a cancel does, puts it back in the queue without spending its attempt, and exits; then no process of the
tree is left: none in the signalled session, not the worker that ran the command, not the command or its child.
A sentinel that never ends its part (django-q2's issue #346, played by freezing it) changes nothing but the time:
past the stop's bound the cluster kills its tree itself. Every wait polls the database, a file or a process with a
deadline; the deadline of the exit is the bound asserted.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.core.timing import shutdown_bound
from scheduler.models import AuditEntry, Run, RunStatus
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.worker.processes import pid_alive
from tests.integration.cluster import ROOT, child_database_url, start_cluster, wait_until
from tests.throwaway import free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
S = RunStatus
GRACE, CANCEL_GRACE = 2, 1
# after the signal: the grace, the cancel's grace, and 5 s for the rest (the tree's end, the last writes)
BOUND = GRACE + CANCEL_GRACE + 5
FAST = {"ETL_CANCEL_GRACE_SECONDS": str(CANCEL_GRACE), "ETL_HEARTBEAT_SECONDS": "0.3",
        # far away: the run's end is the stop's, never governance's (a lost worker would spend an attempt)
        "ETL_STUCK_SECONDS": "60"}
SHELL = 'echo "main $$" >> "$PIDS"; sleep 300 & echo "child $!" >> "$PIDS"; wait'


def _command_run(make_schedule, pids: Path) -> Run:
    schedule = make_schedule("sleeper", target_kind="command", target_id="", retry_max_attempts=3,
                             command={"argv": ["sh", "-c", SHELL], "env": {"PIDS": str(pids)}})
    return run_trigger_manual(schedule=schedule, actor="tests")


def _recorded(pids: Path) -> list[int]:
    return [int(line.split()[1]) for line in pids.read_text().splitlines()] if pids.exists() else []


def _session(sid: int) -> list[int]:
    """The processes (not zombies) of session `sid`: every process the signalled command started in its own."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _ppid, _pgrp, session = stat[stat.rfind(")") + 2:].split()[:4]
        if int(session) == sid and state != "Z":
            found.append(int(entry.name))
    return found


def _running(run: Run, pids: Path, log: Path) -> Run:
    """The run RUNNING on a worker, its shell and the shell's child both recorded."""
    return wait_until(lambda: len(_recorded(pids)) == 2 and (r := Run.objects.get(pk=run.pk)).started_at and r,
                      timeout=60, what="the command and its child to run", log_path=log)


def _stop(proc: subprocess.Popen, signum: int, log: Path, *, bound: float = BOUND) -> float:
    """Signal the process group as a terminal or a process manager does; when (monotonic) it was sent."""
    began, sent = time.monotonic(), time.strftime("%H:%M:%S")
    os.killpg(proc.pid, signum)
    try:
        proc.wait(bound)
    except subprocess.TimeoutExpired:
        ps = subprocess.run(["ps", "-s", str(proc.pid), "-o", "pid,ppid,pgid,stat,wchan:24,etime,args"],
                            capture_output=True, text=True).stdout
        raise AssertionError(f"still running {bound} s after {signum!r} at {sent}\n{ps}\n{log.read_text()[-4000:]}"
                             ) from None
    return began


def _assert_nothing_left(*, sid: int, pids: list[int], began: float, log: Path, bound: float = BOUND) -> None:
    """Within `bound` of the signal, no process of the tree is alive (a SIGKILL the kernel still delivers is waited
    for, up to the bound)."""
    def left() -> list[int]:
        return sorted({pid for pid in pids if pid_alive(pid)} | set(_session(sid)))

    while left() and time.monotonic() < began + bound:
        time.sleep(0.05)
    assert left() == [], f"processes of the tree outlived it: {left()}\n{log.read_text()[-3000:]}"


def _assert_requeued(run: Run) -> None:
    run = Run.objects.get(pk=run.pk)
    assert run.status == S.QUEUED, (run.status, run.reason)
    assert run.attempt == 1, "the cluster's stop spends no attempt"
    assert run.reason.startswith("the cluster stopped; re-queued (attempt 1/3 not spent)"), run.reason
    assert (run.started_at, run.worker_id, run.dispatch_token, run.stop_kind) == (None, "", "", "")
    entries = AuditEntry.objects.filter(target_type="run", target_id=str(run.pk))
    actions = list(entries.values_list("action", flat=True))
    assert "run.stop.shutdown" in actions and "run.requeue.shutdown" in actions, actions


def _kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _sentinel(main: int) -> int:
    """django-q2's sentinel: the cluster's main process's child that leads a process group of its own."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            _state, ppid, pgrp = stat[stat.rfind(")") + 2:].split()[:3]
            if int(ppid) == main and int(pgrp) == int(entry.name):
                return int(entry.name)
    raise AssertionError(f"no sentinel under {main}")


@pytest.mark.parametrize("sentinel", ["stops", "hangs"])
def test_sigterm_to_a_clusters_group_requeues_its_running_command_and_leaves_no_process(make_schedule, tmp_path,
                                                                                        sentinel):
    """"hangs": django-q2's sentinel never ends its part (it is frozen, as in its issue #346): past the stop's
    bound the cluster kills its tree all the same."""
    pids, log = tmp_path / "command.pids", tmp_path / "cluster.log"
    run = _command_run(make_schedule, pids)
    proc = start_cluster("stopping", log_path=log, extra_env=FAST, args=("--grace", str(GRACE)))
    bound = BOUND if sentinel == "stops" else shutdown_bound(grace=GRACE, cancel_grace=CANCEL_GRACE) + 5
    watched: list[int] = []
    try:
        running = _running(run, pids, log)
        worker = int(running.worker_id.rsplit(":", 1)[1])
        watched = [*_recorded(pids), worker, *_session(proc.pid)]
        if sentinel == "hangs":
            os.kill(_sentinel(proc.pid), signal.SIGSTOP)
        began = _stop(proc, signal.SIGTERM, log, bound=bound)
        took = time.monotonic() - began
        _assert_nothing_left(sid=proc.pid, pids=watched, began=began, log=log, bound=bound)
    finally:
        _kill_leftovers(watched)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert proc.returncode == 0, text[-3000:]
    assert took >= GRACE, "the run had its grace"
    assert "the grace of 2 s is over" in text
    assert ("killing its process tree" in text) == (sentinel == "hangs"), text[-3000:]
    _assert_requeued(run)


def test_ctrl_c_to_serves_group_requeues_the_running_command_and_leaves_no_process(make_schedule, tmp_path):
    pids, log = tmp_path / "command.pids", tmp_path / "serve.log"
    run = _command_run(make_schedule, pids)
    port = free_port()
    env = {**os.environ, "DATABASE_URL": child_database_url(), "STATIC_ROOT": str(tmp_path / "static"),
           "ETL_DEMO_LOGINS_FILE": str(tmp_path / "none.txt"), "ETL_DISPATCH_INTERVAL": "0.05",
           "ETL_GOVERNANCE_INTERVAL": "1", "PYTHONUNBUFFERED": "1", **FAST}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}", "--grace",
                                 str(GRACE)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    watched: list[int] = []
    try:
        running = _running(run, pids, log)
        worker = int(running.worker_id.rsplit(":", 1)[1])
        watched = [*_recorded(pids), worker, *_session(proc.pid)]
        began = _stop(proc, signal.SIGINT, log)
        _assert_nothing_left(sid=proc.pid, pids=watched, began=began, log=log)
    finally:
        _kill_leftovers(watched)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert "stopped" in log.read_text()
    _assert_requeued(run)


def test_a_second_serve_on_a_taken_address_is_refused_before_it_starts_a_cluster(tmp_path):
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = subprocess.run([sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}"], cwd=ROOT,
                                env={**os.environ, "DATABASE_URL": child_database_url()}, capture_output=True,
                                text=True, timeout=60)
    assert result.returncode != 0
    assert f"127.0.0.1:{port} is in use" in result.stderr and "another `serve`" in result.stderr
    assert "cluster started" not in result.stdout
