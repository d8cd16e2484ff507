import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, Run, RunStatus

pytestmark = pytest.mark.django_db


def test_it_queues_a_run_with_typed_params_and_records_the_actor(make_schedule):
    make_schedule("nightly_sync")
    out = StringIO()
    call_command("trigger", "nightly_sync", "--param", "limit=5", "--param", "mode=full", "--actor", "alice",
                 "--json", stdout=out)
    data = json.loads(out.getvalue())
    run = Run.objects.get(pk=data["run"])
    assert run.status == RunStatus.QUEUED and data["status"] == "QUEUED"
    assert run.params == {"limit": 5, "mode": "full"}
    assert run.triggered_by == "alice"
    assert AuditEntry.objects.filter(action="run.trigger", actor="alice").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "unknown schedule 'nope'"),
        (["s1", "--param", "novalue"], "expected KEY=VALUE"),
        (["s1", "--param", "=x"], "expected KEY=VALUE"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message_and_creates_nothing(make_schedule, args, message):
    make_schedule("s1")
    with pytest.raises(CommandError) as info:
        call_command("trigger", *args)
    assert info.value.returncode == 2
    assert message in str(info.value)
    assert Run.objects.count() == 0


def test_a_disabled_schedule_is_refused(make_schedule):
    make_schedule("off", enabled=False)
    with pytest.raises(CommandError) as info:
        call_command("trigger", "off")
    assert info.value.returncode == 2 and "disabled" in str(info.value)
    assert Run.objects.count() == 0


def test_wait_returns_when_the_run_is_final_and_fails_for_a_failed_run(make_schedule, monkeypatch):
    make_schedule("s1")
    # A stand-in for the cluster: the run is final the first time the command looks.
    from scheduler.services.runs import queue as runs

    original = runs.run_trigger_manual

    def trigger_and_fail(**kwargs):
        run = original(**kwargs)
        Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, reason="boom")
        return run

    monkeypatch.setattr("scheduler.management.commands.trigger.run_trigger_manual", trigger_and_fail)
    with pytest.raises(CommandError) as info:
        call_command("trigger", "s1", "--wait", "--json", stdout=StringIO())
    assert info.value.returncode == 1 and "FAILED" in str(info.value)
