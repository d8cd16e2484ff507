import getpass
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, NodeRecord, Run, RunStatus, TargetKind

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_run(make_schedule, now):
    from scheduler.services.runs.queue import run_trigger_manual

    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="demo.nightly")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.FAILED)
    run.refresh_from_db()
    NodeRecord.objects.create(run=run, task_id="extract_orders", outcome="SUCCESS", started_at=now, finished_at=now)
    NodeRecord.objects.create(run=run, task_id="build_revenue", outcome="FAILED", started_at=now, finished_at=now)
    return run


def test_it_queues_a_resuming_run_and_prints_what_it_skips(failed_run, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")  # the actor by default, as trigger's
    out = StringIO()
    call_command("rerun_from_failure", str(failed_run.pk), "--reason", "fixed", "--json", stdout=out)
    data = json.loads(out.getvalue())
    new = Run.objects.get(retry_of=failed_run)
    assert data == {"run": new.pk, "rerun_of": failed_run.pk, "schedule": "wf", "skips": ["extract_orders"]}
    assert AuditEntry.objects.get(action="run.rerun_from_failure").actor == "shelly"


@pytest.mark.parametrize("arg, text", [("x", "run_id: 'x' is not a run id"), ("999999", "run_id: unknown run")])
def test_a_bad_run_id_exits_2_naming_it(failed_run, arg, text):
    with pytest.raises(CommandError, match=text) as info:
        call_command("rerun_from_failure", arg)
    assert info.value.returncode == 2 and not Run.objects.filter(retry_of__isnull=False).exists()


def test_a_succeeded_run_is_refused(failed_run):
    Run.objects.filter(pk=failed_run.pk).update(status=RunStatus.SUCCEEDED)
    with pytest.raises(CommandError, match="run: .*only a FAILED or CANCELLED") as info:
        call_command("rerun_from_failure", str(failed_run.pk))
    assert info.value.returncode == 2
