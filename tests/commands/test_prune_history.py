"""`prune_history`: retention by hand, a dry run that says exactly what would go, bad input refused."""
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from scheduler.models import AuditEntry, GovernanceTick, Run, RunLogLine, RunStatus, TriggerKind

pytestmark = pytest.mark.django_db


def _run(schedule, status, age, key):
    at = timezone.now() - age
    return Run.objects.create(schedule=schedule, trigger_key=key, trigger_kind=TriggerKind.MANUAL,
                              workload_class=schedule.workload_class, status=status, queued_at=at, finished_at=at)


@pytest.fixture
def history(make_schedule):
    s = make_schedule("orders")
    old = [_run(s, RunStatus.FAILED, timedelta(days=40), f"old{i}") for i in range(3)]
    for run in old:
        RunLogLine.objects.create(run=run, seq=1, at=run.queued_at, level="INFO", source="x", message="m")
    _run(s, RunStatus.SUCCEEDED, timedelta(days=1), "young")
    GovernanceTick.objects.create(started_at=timezone.now() - timedelta(days=40))
    return s


def _call(*args):
    out, err = StringIO(), StringIO()
    call_command("prune_history", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_dry_run_prints_exactly_what_it_would_delete_per_kind_and_deletes_nothing(history):
    out, err = _call("--older-than", "30d", "--dry-run", "--json")
    counts = json.loads(out)["counts"]
    assert counts == {"runs": 3, "log_lines": 3, "node_records": 0, "ticks": 1, "events": 0, "alerts": 0,
                      "lineage": 0, "audit": 0}
    assert Run.objects.count() == 4 and GovernanceTick.objects.count() == 1
    assert not AuditEntry.objects.filter(action="history.prune").exists()
    assert "runs" in err  # the progress bar, on stderr


def test_it_prunes_in_batches_and_audits_its_counts(history):
    out, _ = _call("--older-than", "30d", "--batch-size", "1")
    assert "runs          deleted 3" in out and "log_lines     deleted 3" in out
    assert Run.objects.count() == 1
    entry = AuditEntry.objects.get(action="history.prune")
    assert entry.actor == "prune_history" and entry.after["runs"] == 3


def test_the_settings_ages_apply_without_older_than(history):
    out, _ = _call("--json")  # 90 days of runs by default: the 40-day-old runs stay; ticks are kept 7 days
    assert json.loads(out)["counts"]["runs"] == 0 and json.loads(out)["counts"]["ticks"] == 1
    assert Run.objects.count() == 4


@pytest.mark.parametrize("args, message", [
    (["--older-than", "soon"], "--older-than: must be an age such as 30d"),
    (["--older-than", "0d"], "--older-than: must be an age"),
    (["--older-than", "36501d"], "--older-than: must be an age such as 30d, 12h or 2w, from 1h to 36500d"),
    (["--batch-size", "0"], "--batch-size: must be a whole number from 1"),
    (["--batch-size", "many"], "--batch-size: must be a whole number from 1"),
])
def test_bad_input_exits_2_naming_the_option_and_deletes_nothing(history, args, message):
    with pytest.raises(CommandError) as info:
        _call(*args)
    assert info.value.returncode == 2 and message in str(info.value)
    assert Run.objects.count() == 4 and not AuditEntry.objects.filter(action="history.prune").exists()
