"""`manage.py run_log`: a run's lines as the text log gives them; --follow with an injected clock and sleep."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone as dt_timezone
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from scheduler.management.commands import run_log
from scheduler.models import Run, RunLogLine, RunStatus, StopKind
from tests.views.conftest import make_run  # noqa: F401  (the run factory, shared)

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=dt_timezone.utc)


def _line(run, seq, message, *, level="INFO", source="shop.orders", at=None):
    RunLogLine.objects.create(run=run, seq=seq, at=at or T0 + timedelta(seconds=seq), level=level, source=source,
                              message=message)


def _call(*args):
    out = StringIO()
    call_command("run_log", *map(str, args), stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.fixture
def fake_time(monkeypatch):
    """The command's wall clock and sleep: each sleep moves the clock on and runs the test's hooks."""
    state = {"now": T0, "hooks": [], "slept": 0}

    def sleep(seconds):
        state["now"] += timedelta(seconds=seconds)
        state["slept"] += 1
        for hook in list(state["hooks"]):
            hook(state)

    monkeypatch.setattr(run_log, "clock", lambda: state["now"])
    monkeypatch.setattr(run_log, "sleep", sleep)
    return state


def test_it_prints_the_lines_as_the_text_log_does(make_schedule, make_run, viewer, client):
    run = make_run(make_schedule("orders"), RunStatus.FAILED)
    _line(run, 1, "reading orders")
    _line(run, 2, "Traceback (most recent call last):\n  boom", level="ERROR", source="scheduler")
    out = _call(run.pk)
    assert out == ("2026-03-02 12:00:01 UTC INFO    shop.orders: reading orders\n"
                   "2026-03-02 12:00:02 UTC ERROR   scheduler: Traceback (most recent call last):\n  boom\n")
    client.force_login(viewer)
    assert client.get(reverse("scheduler:run_log", args=[run.pk])).content.decode() == out  # one formatting


def test_json_prints_the_run_and_its_lines(make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING, stop_requested_at=T0, stop_kind=StopKind.CANCEL,
                   stop_reason="wrong window")
    _line(run, 1, "reading orders")
    data = json.loads(_call(run.pk, "--json"))
    assert data["run"] == run.pk and data["status"] == "RUNNING" and data["shown_status"] == "STOPPING"
    assert data["stop_kind"] == "cancel" and data["stop_reason"] == "wrong window"
    assert data["lines"] == [{"seq": 1, "at": "2026-03-02T12:00:01+00:00", "level": "INFO", "source": "shop.orders",
                              "message": "reading orders"}]


def test_a_run_without_lines_prints_nothing(make_schedule, make_run):
    assert _call(make_run(make_schedule("orders"), RunStatus.SKIPPED).pk) == ""


@pytest.mark.parametrize("arg, message", [("x", "run: 'x' is not a run id"), ("-3", "run: '-3' is not a run id"),
                                          ("424242", "run: unknown run 424242")])
def test_an_unknown_run_exits_2(db, arg, message):
    with pytest.raises(CommandError) as info:
        _call(arg)
    assert info.value.returncode == 2 and message in str(info.value)


def test_follow_prints_new_lines_until_the_run_ends_then_its_status(make_schedule, make_run, fake_time):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    _line(run, 1, "started")
    script = {
        1: lambda: _line(run, 2, "extracting"),
        3: lambda: (_line(run, 3, "loaded 5 rows"), _line(run, 4, "stopping: cancel asked")),
        4: lambda: Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED, reason="cancelled by olivia",
                                                        finished_at=fake_time["now"], exit_code=-15),
        5: lambda: _line(run, 5, "finished CANCELLED", source="scheduler"),  # stored just after the end
    }
    fake_time["hooks"].append(lambda state: script.get(state["slept"], lambda: None)())
    lines = _call(run.pk, "--follow").splitlines()
    assert [line.split(": ", 1)[1] for line in lines[:-1]] == [
        "started", "extracting", "loaded 5 rows", "stopping: cancel asked", "finished CANCELLED"]
    assert lines[-1] == f"run {run.pk} of orders: CANCELLED (cancelled by olivia), exit code -15"
    # it looked every 0.5 s and stopped at the first quiet look a second after the end, without sleeping for real
    assert fake_time["slept"] == 6


def test_follow_of_a_run_that_ended_long_ago_prints_all_and_stops_at_once(make_schedule, make_run, fake_time):
    run = make_run(make_schedule("orders"), RunStatus.SUCCEEDED, finished_at=T0 - timedelta(hours=1))
    _line(run, 1, "done")
    lines = _call(run.pk, "--follow").splitlines()
    assert lines[0].endswith("shop.orders: done") and lines[-1] == f"run {run.pk} of orders: SUCCEEDED"
    assert fake_time["slept"] == 0


def test_follow_gives_up_on_late_lines_after_the_grace(make_schedule, make_run, fake_time):
    run = make_run(make_schedule("orders"), RunStatus.FAILED, finished_at=T0, reason="boom")
    seq = iter(range(1, 1000))
    fake_time["hooks"].append(lambda state: _line(run, next(seq), "still writing"))  # a line on every look
    lines = _call(run.pk, "--follow").splitlines()
    assert lines[-1] == f"run {run.pk} of orders: FAILED (boom)"
    assert fake_time["slept"] == run_log.LOG_GRACE_SECONDS / run_log.POLL_SECONDS


def test_follow_of_a_stopping_run_says_stopping_while_it_follows(make_schedule, make_run, fake_time):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING, stop_requested_at=T0, stop_kind=StopKind.CANCEL,
                   stop_reason="wrong window")
    fake_time["hooks"].append(lambda state: state["slept"] == 2 and Run.objects.filter(pk=run.pk).update(
        status=RunStatus.CANCELLED, reason="wrong window", finished_at=T0 - timedelta(minutes=1)))
    out = _call(run.pk, "--follow", "--json").splitlines()
    closing = json.loads(out[-1])
    assert closing["status"] == "CANCELLED" and closing["shown_status"] == "CANCELLED" and closing["run"] == run.pk


def test_follow_json_is_one_object_per_line(make_schedule, make_run, fake_time):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    _line(run, 1, "one")
    fake_time["hooks"].append(lambda state: state["slept"] == 1 and (
        _line(run, 2, "two"),
        Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, finished_at=T0 - timedelta(minutes=1))))
    rows = [json.loads(line) for line in _call(run.pk, "--follow", "--json").splitlines()]
    assert [r.get("message") for r in rows[:2]] == ["one", "two"] and rows[0]["seq"] == 1
    assert rows[-1]["status"] == "SUCCEEDED" and "lines" not in rows[-1]


def test_closing_line_of_a_stopping_run_names_the_stop(make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING, stop_requested_at=T0, stop_kind=StopKind.CANCEL,
                   stop_reason="wrong window")
    assert run_log.closing_line(Run.objects.select_related("schedule").get(pk=run.pk)) == (
        f"run {run.pk} of orders: STOPPING (wrong window)")
