"""The supervisor, driven with its own clock: grace periods, forced stops, fencing, no process left behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from scheduler.core.stop import CANCEL, FENCE, TERMINATE, TIMEOUT, StopToken
from scheduler.services.worker import supervisor
from scheduler.services.worker.supervisor import RunControl, Supervisor

PY = sys.executable
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
)


def _control(run_id=1, *, timeout=None, grace=5.0, on_force=None) -> RunControl:
    return RunControl(run_id=run_id, token="t", stop=StopToken(timeout=timeout), grace=grace, on_force=on_force)


def _watched(sup: Supervisor, control: RunControl) -> RunControl:
    sup.controls[control.run_id] = control
    return control


def _spawn(control: RunControl, code: str) -> subprocess.Popen:
    proc = supervisor.spawn([PY, "-c", code], cwd=None, env=dict(os.environ), control=control)
    assert proc.stdout.readline().strip() == b"up"  # its handlers are in place
    return proc


def _alive(pid: int) -> bool:
    return supervisor.pid_alive(pid)


def test_a_command_gets_sigterm_at_once_and_sigkill_only_after_the_grace():
    sup = Supervisor()
    control = _watched(sup, _control(grace=5.0))
    proc = _spawn(control, IGNORES_TERM)
    try:
        sup.request(1, CANCEL, "operator")
        assert control.termed and not control.killed
        asked = control.requested.at
        sup.tick(asked + 4.9)
        assert proc.poll() is None  # it ignores SIGTERM and the grace has not passed
        sup.tick(asked + 5.0)
        assert control.killed
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        supervisor.reap_group(control)


def test_terminate_kills_at_once_and_escalates_a_cancel_in_its_grace():
    sup = Supervisor()
    control = _watched(sup, _control(grace=30.0))
    proc = _spawn(control, IGNORES_TERM)
    try:
        sup.request(1, CANCEL, "operator")
        assert proc.poll() is None and not control.killed
        sup.request(1, TERMINATE, "kill now")
        assert control.killed and control.requested.kind == TERMINATE
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        supervisor.reap_group(control)


def test_a_python_run_that_ignores_the_request_has_its_process_ended_after_the_grace():
    ended, notes = [], []
    sup = Supervisor()
    sup.end_process = lambda: ended.append(True)
    control = _watched(sup, _control(grace=2.0, on_force=lambda _control, note: notes.append(note)))
    sup.request(1, CANCEL, "operator")
    asked = control.requested.at
    sup.tick(asked + 1.0)
    assert ended == []
    sup.tick(asked + 2.0)
    assert ended == [True]
    assert "did not stop within 2 s" in notes[0]
    sup.tick(asked + 3.0)
    assert ended == [True]  # once


def test_the_runs_timeout_is_found_by_the_supervisor_and_is_a_timeout_request():
    sup = Supervisor()
    clock = [100.0]
    control = _watched(sup, RunControl(run_id=1, token="t", stop=StopToken(timeout=30, clock=lambda: clock[0]),
                                       grace=5.0))
    sup.end_process = lambda: None
    clock[0] = 129.9
    sup.tick(clock[0])
    assert control.requested is None
    clock[0] = 130.0
    sup.tick(clock[0])
    assert (control.requested.kind, control.requested.reason) == (TIMEOUT, "timed out after 30 s")
    assert not control.recorded  # the pump writes it to the database with its next beat


def test_a_worker_that_cannot_write_its_heartbeat_fences_its_runs_before_governance_may():
    assert settings.ETL_FENCE_SECONDS < settings.ETL_STUCK_SECONDS
    ended = []
    sup = Supervisor()
    sup.end_process = lambda: ended.append(True)
    control = _watched(sup, RunControl(run_id=1, token="t", stop=StopToken(clock=lambda: 990.0), grace=30.0))
    sup.last_beat_ok = 1000.0
    sup.tick(1000.0 + settings.ETL_FENCE_SECONDS - 0.1)
    assert control.requested is None
    fenced_at = 1000.0 + settings.ETL_FENCE_SECONDS
    sup.tick(fenced_at)
    assert control.requested.kind == FENCE
    # the fence's grace ends before governance's threshold, whatever ETL_CANCEL_GRACE_SECONDS says
    grace = control.grace_for(FENCE)
    assert settings.ETL_FENCE_SECONDS + grace < settings.ETL_STUCK_SECONDS
    sup.tick(control.requested.at + grace)
    assert ended == [True]


def test_a_run_begun_after_an_idle_spell_is_not_fenced_for_the_pumps_silence_before_it():
    sup = Supervisor()
    sup.last_beat_ok = 0.0  # the pump had nothing to beat for a long time
    control = _watched(sup, RunControl(run_id=1, token="t", stop=StopToken(clock=lambda: 5000.0), grace=30.0))
    sup.tick(5000.0 + settings.ETL_FENCE_SECONDS - 0.1)
    assert control.requested is None


def test_no_child_grandchild_daemon_or_zombie_outlives_a_command(tmp_path: Path):
    pids = tmp_path / "pids"
    code = f"""
import os, subprocess, sys, time
kids = [subprocess.Popen(["sleep", "300"]).pid for _ in range(2)]
if os.fork() == 0:          # a daemon: double fork, new session, out of the process group
    os.setsid()
    if os.fork() == 0:
        open({str(pids)!r}, "a").write(str(os.getpid()) + "\\n")
        time.sleep(300)
    os._exit(0)
open({str(pids)!r}, "a").write("\\n".join(map(str, kids)) + "\\n")
print("up", flush=True)
time.sleep(300)
"""
    sup = Supervisor()
    control = _watched(sup, _control(grace=0.5))
    proc = _spawn(control, code)
    deadline = time.monotonic() + 10
    while len(pids.read_text().split()) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    spawned = [int(p) for p in pids.read_text().split()]
    assert len(spawned) == 3 and all(_alive(pid) for pid in spawned)
    sup.request(1, TERMINATE, "stop")
    proc.wait(timeout=10)
    assert supervisor.reap_group(control) == []
    assert [pid for pid in spawned if _alive(pid)] == []


def test_a_daemon_left_by_a_command_that_already_exited_is_ended_and_its_parent_reaped(tmp_path: Path):
    # the command's group is gone when it is reaped: what it left is found among this process's own children
    pids = tmp_path / "pids"
    code = f"""
import os, time
if os.fork() == 0:          # out of the group at once, then a daemon of its own; the leader exits first
    os.setsid()
    if os.fork() == 0:
        open({str(pids)!r}, "a").write(str(os.getpid()) + "\\n")
        time.sleep(300)
    time.sleep(0.2)
    os._exit(0)
"""
    sup = Supervisor()
    control = _watched(sup, _control(grace=0.5))
    proc = supervisor.spawn([PY, "-c", code], cwd=None, env=dict(os.environ), control=control)
    assert proc.wait(timeout=10) == 0
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    daemon = int(pids.read_text())
    time.sleep(0.5)  # its parent has exited too: the daemon is an orphan of this process (the subreaper)
    assert _alive(daemon)
    assert supervisor._group_gone(proc.pid)
    assert supervisor.reap_group(control) == []
    assert not _alive(daemon)
    assert [pid for pid, state, _ in supervisor._children() if pid not in control.children] == []  # no zombie


def test_the_supervisor_never_touches_children_this_process_had_before_the_command():
    bystander = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
    try:
        sup = Supervisor()
        control = _watched(sup, _control(grace=0.5))
        proc = _spawn(control, "import time; print('up', flush=True); time.sleep(30)")
        sup.request(1, TERMINATE, "stop")
        proc.wait(timeout=10)
        assert supervisor.reap_group(control) == []
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize("kind", [CANCEL, TIMEOUT])
def test_a_stop_asked_while_the_command_starts_reaches_it(kind):
    sup = Supervisor()
    control = _watched(sup, _control(grace=0.0))
    control.stop.request(kind, "early")
    proc = supervisor.spawn([PY, "-c", IGNORES_TERM], cwd=None, env=dict(os.environ), control=control)
    # SIGTERM at once (it may land before the handler is in place), SIGKILL with the zero grace
    assert proc.wait(timeout=10) in (-signal.SIGTERM, -signal.SIGKILL)
    assert control.termed and control.killed
    supervisor.reap_group(control)


def test_a_fenced_python_run_is_ended_without_waiting_for_its_last_words():
    """The last note goes to the database, which a fenced worker cannot reach: waiting for it (up to
    LAST_WORDS_SECONDS) would end the process after governance may have re-queued the run."""
    ended, notes = [], []
    sup = Supervisor()
    sup.end_process = lambda: ended.append(True)
    control = _watched(sup, RunControl(run_id=1, token="t", stop=StopToken(clock=lambda: 990.0), grace=30.0,
                                       on_force=lambda _c, note: (notes.append(note), time.sleep(60))))
    sup.last_beat_ok = 1000.0
    sup.tick(1000.0 + settings.ETL_FENCE_SECONDS)
    assert control.requested.kind == FENCE
    sup.tick(control.requested.at + control.grace_for(FENCE))
    assert ended == [True]
    assert notes == []  # never asked for: the process is ended at once
