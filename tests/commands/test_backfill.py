import getpass
import json
from io import StringIO
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from scheduler.models import Backfill, BackfillStatus, Run, RunStatus, TriggerKind
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def marked(make_schedule):
    return make_schedule("marked", watermark_config={"type": "integer", "column": "id"})


def test_it_submits_a_backfill_and_prints_json(marked, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")  # the actor by default, as trigger's
    out = StringIO()
    call_command("backfill", "marked", "--from", "0", "--to", "1000", "--window", "250", "--reason", "replay",
                 "--max-parallel", "2", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert (data["schedule"], data["status"], data["max_parallel"]) == ("marked", "ACTIVE", 2)
    assert data["progress"]["total"] == 4 and data["progress"]["pending"] == 4
    assert Backfill.objects.get(pk=data["id"]).requested_by == "shelly"


@pytest.mark.parametrize("args, text", [
    (["--from", "10", "--to", "5", "--window", "1"], "to: must be after from"),
    (["--from", "0", "--to", "5", "--window", "0"], "window"),
    (["--from", "zero", "--to", "5", "--window", "1"], "from"),
    (["--from", "0", "--to", "5", "--window", "1", "--max-parallel", "none"], "max_parallel"),
])
def test_bad_input_exits_2_naming_the_field_and_creates_nothing(marked, args, text):
    with pytest.raises(CommandError) as info:
        call_command("backfill", "marked", *args, "--reason", "r")
    assert info.value.returncode == 2 and text in str(info.value)
    assert not Backfill.objects.exists()


def test_a_schedule_without_watermark_exits_2(make_schedule):
    make_schedule("plain")
    with pytest.raises(CommandError) as info:
        call_command("backfill", "plain", "--from", "0", "--to", "5", "--window", "1", "--reason", "r")
    assert info.value.returncode == 2 and "no watermark config" in str(info.value)


def test_wait_draws_a_progress_bar_until_the_backfill_completes(marked, now):
    out, err = StringIO(), StringIO()
    # each poll of the command lets the dispatcher and a worker do one round
    with mock.patch("scheduler.management.commands.backfill.pause", side_effect=lambda s: tick_and_execute(now)):
        call_command("backfill", "marked", "--from", "0", "--to", "30", "--window", "10", "--reason", "r",
                     "--wait", "--poll", "0", stdout=out, stderr=err)
    assert "[----------" in err.getvalue()  # the first frame, nothing done yet
    assert "[##############################] 3/3 done, 0 failed, 0 running (completed)" in err.getvalue()
    assert "backfill" in out.getvalue() and "completed" in out.getvalue()
    assert Backfill.objects.get().status == BackfillStatus.COMPLETED


def test_params_go_with_the_backfill_to_every_window(marked):
    out = StringIO()
    call_command("backfill", "marked", "--from", "0", "--to", "100", "--window", "50", "--reason", "replay",
                 "--param", "table=fact_replay", "--param", "batch=3", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["params"] == {"table": "fact_replay", "batch": 3}
    assert Backfill.objects.get(pk=data["id"]).params == {"table": "fact_replay", "batch": 3}


def test_a_malformed_param_names_the_option_and_creates_nothing(marked):
    with pytest.raises(CommandError, match="--param 'table'") as info:
        call_command("backfill", "marked", "--from", "0", "--to", "100", "--window", "50", "--reason", "r",
                     "--param", "table")
    assert info.value.returncode == 2 and not Backfill.objects.exists()


def test_newest_first_queues_the_latest_window_first(marked, now):
    from scheduler.models import BackfillWindow
    from scheduler.services.admission.backfills import backfill_pump

    call_command("backfill", "marked", "--from", "0", "--to", "1000", "--window", "250", "--reason", "replay",
                 "--newest-first", stdout=StringIO())
    backfill = Backfill.objects.get()
    assert backfill.newest_first
    backfill_pump(now=now)
    assert BackfillWindow.objects.get(backfill=backfill, status="QUEUED").high == "1000"


def _succeeded(schedule, low, high):
    return Run.objects.create(schedule=schedule, trigger_key=f"t{low}", trigger_kind=TriggerKind.MANUAL,
                              workload_class=schedule.workload_class, status=RunStatus.SUCCEEDED,
                              queued_at=timezone.now(), finished_at=timezone.now(), window_low=low, window_high=high)


def test_reprocess_failed_submits_only_the_windows_without_a_succeeded_run(marked):
    _succeeded(marked, "0", "250")
    _succeeded(marked, "500", "750")
    out = StringIO()
    call_command("backfill", "marked", "--from", "0", "--to", "1000", "--window", "250", "--reason", "replay",
                 "--reprocess", "failed", stdout=out)
    backfill = Backfill.objects.get()
    assert backfill.total_windows == 2
    assert "2 window(s)" in out.getvalue() and "2 already succeeded, skipped" in out.getvalue()
    call_command("backfill", "marked", "--from", "0", "--to", "1000", "--window", "250", "--reason", "replay",
                 "--reprocess", "all", stdout=StringIO())
    assert Backfill.objects.latest("id").total_windows == 4


def test_a_bad_reprocess_value_exits_2_naming_the_field(marked):
    with pytest.raises(CommandError) as info:
        call_command("backfill", "marked", "--from", "0", "--to", "5", "--window", "1", "--reason", "r",
                     "--reprocess", "some")
    assert info.value.returncode == 2 and "reprocess" in str(info.value)
    assert not Backfill.objects.exists()
