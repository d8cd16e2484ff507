"""A cancelled run's log ends with the cancel, not with an earlier attempt's error (issue 23, point 10)."""
from __future__ import annotations

import sys

import pytest

from scheduler.models import Run, RunLogLine, RunStatus, StopKind
from scheduler.services.worker import commands
from scheduler.services.worker import supervisor
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_beat_during_the_run")]
PY = sys.executable


def _lines(run):
    return list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("level", "message"))


def _failing_command(make_schedule):
    return make_schedule("c1", target_kind="command", target_id="", retry_max_attempts=6, retry_initial_delay=0.01,
                         command={"argv": [PY, "-c", "print('boom: table missing'); raise SystemExit(3)"]})


def test_a_run_cancelled_while_queued_for_its_next_attempt_ends_its_log_with_the_cancel(make_schedule, now):
    run = run_trigger_manual(schedule=_failing_command(make_schedule), actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token, clock=lambda: now)
    run.refresh_from_db()
    assert (run.status, run.attempt) == (RunStatus.QUEUED, 2)  # attempt 1 failed, attempt 2 waits its back-off
    assert run_cancel(run=run, actor="olivia", reason="the table is gone for good", now=now)
    level, message = _lines(run)[-1]
    assert level == "INFO"
    assert message == "cancelled by olivia before attempt 2 of 6 began: the table is gone for good"
    run.refresh_from_db()
    assert (run.status, run.attempts_begun) == (RunStatus.CANCELLED, 1)


def test_a_run_cancelled_before_any_attempt_says_so(make_schedule, now):
    run = run_trigger_manual(schedule=make_schedule("s1"), actor="tests", now=now)
    run_cancel(run=run, actor="olivia", reason="not today", now=now)
    assert _lines(run) == [("INFO", "cancelled by olivia before it began: not today")]
    run.refresh_from_db()
    assert run.attempts_begun == 0


def test_a_command_that_exits_on_its_cancel_logs_no_error(make_schedule, now, monkeypatch):
    spawn = supervisor.spawn

    def spawn_then_cancel(argv, *, cwd, env, control):
        proc = spawn(argv, cwd=cwd, env=env, control=control)
        supervisor.Supervisor.get().request(control.run_id, StopKind.CANCEL, "operator said so")
        return proc

    monkeypatch.setattr(commands.supervisor, "spawn", spawn_then_cancel)
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda *_: (print('stopping', flush=True), sys.exit(143)))\n"
              "time.sleep(60)\n")
    schedule = make_schedule("c2", target_kind="command", target_id="", retry_max_attempts=6,
                             command={"argv": [PY, "-c", script]})
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    assert execute_run(run.pk, run.dispatch_token) == RunStatus.CANCELLED
    lines = _lines(run)
    assert [line for line in lines if line[0] == "ERROR"] == [], lines
    assert [m for lv, m in lines if m.startswith("command exited with ")] in (
        ["command exited with exit code 143 after it was asked to stop"],
        ["command exited with signal 15 after it was asked to stop"]), lines  # its handler may not be set yet
    assert lines[-1][1].startswith("finished CANCELLED")
    assert Run.objects.get(pk=run.pk).attempts_begun == 1
