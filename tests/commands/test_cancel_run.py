"""`manage.py cancel_run`: the same authorization and outcomes as the run page, --wait with an injected clock."""
from __future__ import annotations

import getpass
import json
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from scheduler.management.commands import cancel_run
from scheduler.models import AuditEntry, Run, RunStatus, Schedule, StopKind, Team
from scheduler.services.runs.end import run_stop_settled
from tests.views.conftest import make_run  # noqa: F401  (the run factory, shared)

pytestmark = pytest.mark.django_db


def _running(make_run, schedule, **fields):
    return make_run(schedule, RunStatus.RUNNING, **fields)


def _call(*args):
    out, err = StringIO(), StringIO()
    call_command("cancel_run", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def fake_time(monkeypatch):
    """The command's clock and sleep: each sleep advances the clock and runs the test's hook (the "worker")."""
    state = {"now": 100.0, "hooks": [], "slept": 0}

    def sleep(seconds):
        state["now"] += seconds
        state["slept"] += 1
        for hook in list(state["hooks"]):
            hook(state)

    monkeypatch.setattr(cancel_run, "clock", lambda: state["now"])
    monkeypatch.setattr(cancel_run, "sleep", sleep)
    return state


def test_a_started_run_is_asked_to_stop_and_shows_stopping(make_schedule, make_run, operator):
    run = _running(make_run, make_schedule("orders"))
    out, _ = _call(run.pk, "--actor", "olivia", "--reason", "wrong window")
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.stop_kind == StopKind.CANCEL and run.stop_reason == "wrong window"
    assert out.strip() == (f"run {run.pk} of orders: stopping (cancelled: wrong window); "
                           "it keeps its slot until its work has ended")
    assert AuditEntry.objects.filter(action="run.stop.cancel", actor="olivia", target_id=str(run.pk)).exists()


def test_a_queued_run_is_cancelled_at_once_and_json_says_so(make_schedule, make_run, operator):
    run = make_run(make_schedule("orders"), RunStatus.QUEUED)
    out, _ = _call(run.pk, "--actor", "olivia", "--json")
    data = json.loads(out)
    assert data == {"run": run.pk, "schedule": "orders", "outcome": "cancelled", "status": "CANCELLED",
                    "shown_status": "CANCELLED", "stop_kind": "", "stop_reason": "", "reason": "cancelled by olivia",
                    "exit_code": None}


def test_json_of_a_stopping_run_names_the_stop(make_schedule, make_run, operator):
    run = _running(make_run, make_schedule("orders"))
    data = json.loads(_call(run.pk, "--actor", "olivia", "--json", "--force")[0])
    assert data["outcome"] == "stopping" and data["status"] == "RUNNING" and data["shown_status"] == "STOPPING"
    assert data["stop_kind"] == "terminate" and data["stop_reason"] == "killed by olivia"


def test_force_escalates_a_pending_cancel_and_a_second_cancel_changes_nothing(make_schedule, make_run, operator):
    run = _running(make_run, make_schedule("orders"))
    _call(run.pk, "--actor", "olivia")
    out, _ = _call(run.pk, "--actor", "olivia", "--reason", "again")
    assert "already stopping (cancelled: cancelled by olivia)" in out
    _call(run.pk, "--actor", "olivia", "--force")
    run.refresh_from_db()
    assert run.stop_kind == StopKind.TERMINATE and run.stop_reason == "killed by olivia"


def test_the_actor_defaults_to_the_shell_user_as_trigger_does(make_schedule, make_run, make_user, default_team,
                                                               monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")
    run = _running(make_run, make_schedule("orders"))
    _call(run.pk)  # no user named shelly: a system actor, trusted as the shell is
    assert AuditEntry.objects.filter(action="run.stop.cancel", actor="shelly").exists()
    viewer = make_user("shelly2", "viewer")
    monkeypatch.setattr(getpass, "getuser", lambda: viewer.username)
    other = _running(make_run, make_schedule("sales"))
    with pytest.raises(CommandError) as info:
        _call(other.pk)  # the shell user is a user: held to their permissions
    assert info.value.returncode == 2 and "lacks the permission scheduler.cancel_run" in str(info.value)


@pytest.mark.parametrize("args, message", [
    (["nope"], "run: 'nope' is not a run id"),
    (["0"], "run: '0' is not a run id"),
    (["999999"], "run: unknown run 999999"),
    (["{run}", "--timeout", "0"], "--timeout: must be a finite number > 0"),
    (["{run}", "--timeout", "nan"], "--timeout: must be a finite number > 0"),
])
def test_bad_input_exits_2_and_changes_nothing(make_schedule, make_run, args, message):
    run = _running(make_run, make_schedule("orders"))
    with pytest.raises(CommandError) as info:
        _call(*[a.format(run=run.pk) for a in args])
    assert info.value.returncode == 2 and message in str(info.value)
    run.refresh_from_db()
    assert run.stop_requested_at is None


def test_another_teams_run_is_refused_audited_and_unchanged(make_schedule, make_run, operator):
    schedule = make_schedule("ledger")
    Schedule.objects.filter(pk=schedule.pk).update(owner=Team.objects.create(name="payments"))
    run = _running(make_run, schedule)
    with pytest.raises(CommandError) as info:
        _call(run.pk, "--actor", "olivia")
    assert info.value.returncode == 2 and "may not cancel runs of schedule 'ledger'" in str(info.value)
    run.refresh_from_db()
    assert run.stop_requested_at is None
    assert AuditEntry.objects.filter(action="permission.denied", actor="olivia").exists()


def test_a_final_run_exits_2_saying_so(make_schedule, make_run, operator):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    with pytest.raises(CommandError) as info:
        _call(run.pk, "--actor", "olivia")
    assert info.value.returncode == 2 and f"run {run.pk} is already SUCCEEDED" in str(info.value)


def test_wait_shows_progress_until_the_worker_writes_the_end(make_schedule, make_run, operator, fake_time):
    run = _running(make_run, make_schedule("orders"))

    def worker_ends_it(state):  # the worker notices the stop on its third look
        if state["slept"] == 3:
            stopping = Run.objects.get(pk=run.pk)
            assert run_stop_settled(run=stopping, now=timezone.now(), why="its code stopped")

    fake_time["hooks"].append(worker_ends_it)
    out, err = _call(run.pk, "--actor", "olivia", "--wait")
    assert out.strip() == f"run {run.pk} of orders: CANCELLED (cancelled by olivia)"
    assert err.splitlines() == ["stopping 0.0 s..."]  # not a TTY: a line when the state changes, not per look
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_wait_draws_a_spinner_line_on_a_terminal(make_schedule, make_run, operator, fake_time):
    class Tty(StringIO):
        def isatty(self):
            return True

    run = _running(make_run, make_schedule("orders"))
    fake_time["hooks"].append(lambda s: s["slept"] == 2 and run_stop_settled(
        run=Run.objects.get(pk=run.pk), now=timezone.now(), why="stopped"))
    err = Tty()
    call_command("cancel_run", str(run.pk), "--actor", "olivia", "--wait", stdout=StringIO(), stderr=err)
    text = err.getvalue()
    assert "\r| stopping 0.0 s..." in text and "\r/ stopping 0.2 s..." in text and text.endswith("\n")


def test_wait_times_out_with_exit_1(make_schedule, make_run, operator, fake_time):
    run = _running(make_run, make_schedule("orders"))
    with pytest.raises(CommandError) as info:
        _call(run.pk, "--actor", "olivia", "--wait", "--timeout", "1")
    assert info.value.returncode == 1 and f"run {run.pk} still STOPPING after 1 s" in str(info.value)
    assert fake_time["slept"] == 5  # 0.2 s looks: no real sleep


def test_wait_exits_1_when_the_run_ended_otherwise(make_schedule, make_run, operator, fake_time):
    run = _running(make_run, make_schedule("orders"))

    def a_timeout_won(state):  # the run was being stopped for its timeout: it ends FAILED, not CANCELLED
        Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, reason="timed out after 30 s",
                                             finished_at=timezone.now())

    fake_time["hooks"].append(a_timeout_won)
    with pytest.raises(CommandError) as info:
        _call(run.pk, "--actor", "olivia", "--wait", "--json")
    assert info.value.returncode == 1 and "ended FAILED (timed out after 30 s)" in str(info.value)


def test_wait_on_a_queued_run_returns_at_once(make_schedule, make_run, operator, fake_time):
    run = make_run(make_schedule("orders"), RunStatus.QUEUED)
    out, err = _call(run.pk, "--actor", "olivia", "--wait")
    assert "CANCELLED" in out and err == "" and fake_time["slept"] == 0


@pytest.mark.django_db(transaction=True)
def test_wait_for_real_against_a_worker_thread(make_schedule, make_run, operator, monkeypatch):
    """No injected clock: a thread stands for the worker and writes the end while the command waits."""
    monkeypatch.setattr(cancel_run, "POLL_SECONDS", 0.01)
    run = _running(make_run, make_schedule("orders"))
    asked = threading.Event()

    def worker():
        try:
            for _ in range(2000):
                row = Run.objects.get(pk=run.pk)
                if row.stop_requested_at is not None:
                    asked.set()
                    run_stop_settled(run=row, now=timezone.now(), why="its code stopped")
                    return
                threading.Event().wait(0.01)
        finally:
            connection.close()  # the thread's own connection

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        out, _ = _call(run.pk, "--actor", "olivia", "--wait", "--timeout", "30")
    finally:
        thread.join(30)
    assert asked.is_set() and "CANCELLED" in out

