"""A command target is authored in the schedules file or through `SchedulerHost.schedules`, never by run params.

(The admin's door is tests/views/test_admin_command_targets.py.)
"""
from __future__ import annotations

import json
import sys
import textwrap

import pytest

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Run, RunLogLine, RunStatus, Schedule
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.events import event_emit
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedule_files import ScheduleFileError, schedules_apply, schedules_export
from scheduler.services.admission.webhooks import Delivery, sign_webhook, webhook_receive

pytestmark = pytest.mark.django_db
PY = sys.executable

# the issue's example, as written
NIGHTLY_DBT = textwrap.dedent("""\
    - name: nightly_dbt
      target_kind: command
      command: {argv: [dbt, build, --select, "tag:nightly"], cwd: /srv/dbt, env: {DBT_TARGET: prod}}
      timeout_seconds: 3600
""")
DBT = {"argv": ["dbt", "build", "--select", "tag:nightly"], "cwd": "/srv/dbt", "env": {"DBT_TARGET": "prod"}}


def file_of(entries: str) -> str:
    return "version: 1\nschedules:\n" + textwrap.indent(entries, "  ")


def problems_of(text: str) -> list[tuple[str, str | None, str]]:
    with pytest.raises(ScheduleFileError) as info:
        schedules_apply(text=text, actor="tests")
    return [(p.entry, p.field, p.problem) for p in info.value.problems]


# --- the schedules file ---------------------------------------------------------------

def test_the_issues_example_applies_as_written():
    plan = schedules_apply(text=file_of(NIGHTLY_DBT), actor="tests")
    assert plan.summary["create"] == 1 and plan.applied
    schedule = Schedule.objects.get(name="nightly_dbt")
    assert (schedule.target_kind, schedule.target_id, schedule.command) == ("command", "", DBT)
    assert (schedule.timeout_seconds, schedule.deadline_seconds) == (3600, None)
    entry = AuditEntry.objects.get(action="schedule.create")
    assert entry.after["command"] == DBT and entry.after["timeout_seconds"] == 3600


def test_a_bare_list_of_entries_is_not_a_schedules_file_but_the_entries_under_schedules_are():
    """The issue shows the entry as it sits under `schedules:`; on its own, the file says what it wants."""
    assert problems_of(NIGHTLY_DBT) == [("file", None, "must be a mapping with a 'schedules' list")]


def test_export_round_trips_a_command_target_and_its_limits():
    schedules_apply(text=file_of(NIGHTLY_DBT + "  deadline_seconds: 7200\n  overlap_policy: terminate_other\n"),
                    actor="tests")
    text = schedules_export()
    assert "target_kind: command" in text and "- tag:nightly" in text and "DBT_TARGET: prod" in text
    assert "timeout_seconds: 3600" in text and "deadline_seconds: 7200" in text
    assert "overlap_policy: terminate_other" in text
    Schedule.objects.all().delete()
    assert schedules_apply(text=text, actor="tests").summary["create"] == 1
    assert schedules_apply(text=text, actor="tests").summary == {"create": 0, "update": 0, "unchanged": 1,
                                                                 "delete": 0}
    schedule = Schedule.objects.get()
    assert (schedule.command, schedule.timeout_seconds, schedule.deadline_seconds) == (DBT, 3600, 7200)


def test_a_changed_command_is_an_update_with_its_diff_and_a_removed_limit_goes_back_to_none():
    schedules_apply(text=file_of(NIGHTLY_DBT), actor="tests")
    changed = NIGHTLY_DBT.replace('"tag:nightly"', '"tag:hourly"').replace("  timeout_seconds: 3600\n", "")
    plan = schedules_apply(text=file_of(changed), actor="tests")
    [change] = plan.changes
    assert change.action == "update"
    assert change.changes["command"][1]["argv"] == ["dbt", "build", "--select", "tag:hourly"]
    assert change.changes["timeout_seconds"] == (3600, None)
    schedule = Schedule.objects.get()
    assert schedule.command["argv"][-1] == "tag:hourly" and schedule.timeout_seconds is None


def test_a_pipeline_schedule_becomes_a_command_target(make_schedule):
    make_schedule("nightly_dbt", target_id="demo.noop")
    plan = schedules_apply(text=file_of(NIGHTLY_DBT), actor="tests")
    assert set(plan.changes[0].changes) >= {"target_kind", "target_id", "command", "timeout_seconds"}
    assert Schedule.objects.get().target_kind == "command"


@pytest.mark.parametrize("entry, field, words", [
    ("command: {cwd: /srv/dbt}", "command", 'needs exactly one of "argv"'),
    ("command: {argv: dbt build}", "command.argv", "must be a non-empty list of strings"),
    ("command: {argv: [dbt, 7]}", "command.argv", "item 1 must be a string"),
    ("command: {argv: [dbt], shell: dbt build}", "command", 'needs exactly one of "argv"'),
    ("command: {argv: [dbt], cwd: srv/dbt}", "command.cwd", "must be an absolute path"),
    ("command: {argv: [dbt], env: {ETL_PARAMS: '{}'}}", "command.env", "ETL_* variables are the scheduler's"),
    ("command: {argv: [dbt], env: {DBT_THREADS: 4}}", "command.env", "the value must be a string"),
    ("command: [dbt, build]", "command", "must be an object"),
    ("command: {argv: [dbt], timeout: 5}", "command", "unknown key(s) timeout"),
    ("target_id: demo.noop\ncommand: {argv: [dbt]}", "target_id", "must be empty for a command target"),
    ("command: {argv: [dbt]}\ntimeout_seconds: 0", "timeout_seconds", "must be >= 1"),
    ("command: {argv: [dbt]}\ndeadline_seconds: soon", "deadline_seconds", "must be a whole number"),
    ("command: {argv: [dbt]}\noverlap_policy: terminate_all", "overlap_policy", "terminate_other"),
])
def test_a_bad_command_entry_names_entry_and_field_and_changes_nothing(make_schedule, entry, field, words):
    make_schedule("keep", priority=3)
    text = file_of("- name: keep\n  target_id: demo.noop\n  priority: 4\n"
                   "- name: nightly_dbt\n  target_kind: command\n" + textwrap.indent(entry, "  ") + "\n")
    [(where, named, problem)] = problems_of(text)
    assert (where, named) == ("schedules[1] (nightly_dbt)", field)
    assert words in problem
    assert list(Schedule.objects.values_list("name", "priority")) == [("keep", 3)]
    assert not AuditEntry.objects.exclude(action="schedule.create").exists()


def test_a_command_given_to_a_pipeline_target_is_refused():
    text = file_of("- name: orders\n  target_id: demo.noop\n  command: {argv: [dbt]}\n")
    [(_, field, problem)] = problems_of(text)
    assert field == "command" and "only a command target has a command" in problem


# --- the Python API ---------------------------------------------------------------------

def test_the_python_api_creates_and_updates_a_command_target(standard_class):
    host = SchedulerHost()
    schedule = host.schedules.create("nightly_dbt", target_kind="command", command=DBT, timeout_seconds=3600,
                                     deadline_seconds=7200, overlap_policy="terminate_other", reason="from code")
    assert (schedule.command, schedule.timeout_seconds, schedule.deadline_seconds) == (DBT, 3600, 7200)
    host.schedules.update("nightly_dbt", timeout_seconds=None, command={"shell": "dbt build | tee /tmp/out"})
    schedule.refresh_from_db()
    assert schedule.command == {"shell": "dbt build | tee /tmp/out"} and schedule.timeout_seconds is None
    assert host.schedules.spec("nightly_dbt")["command"] == {"shell": "dbt build | tee /tmp/out"}


@pytest.mark.parametrize("fields, field", [
    ({"target_kind": "command"}, "command"),
    ({"target_kind": "command", "command": {"argv": "dbt build"}}, "command.argv"),
    ({"target_kind": "command", "command": {"argv": ["dbt"], "cwd": "./dbt"}}, "command.cwd"),
    ({"target_kind": "command", "command": {"argv": ["dbt"], "env": {"ETL_RUN_ID": "1"}}}, "command.env"),
    ({"target_kind": "command", "command": {"argv": ["dbt"]}, "target_id": "demo.noop"}, "target_id"),
    ({"target_kind": "command", "command": {"argv": ["dbt"]}, "timeout_seconds": -1}, "timeout_seconds"),
    ({"target_kind": "command", "command": {"argv": ["dbt"]}, "deadline_seconds": 2**40}, "deadline_seconds"),
])
def test_the_python_api_refuses_bad_input_naming_the_field_and_creates_nothing(standard_class, fields, field):
    with pytest.raises(ServiceError) as info:
        SchedulerHost().schedules.create("nightly_dbt", **fields)
    assert field in {error.field for error in info.value.errors}, info.value.errors
    assert not Schedule.objects.exists()


def test_a_bad_update_through_the_python_api_changes_nothing(standard_class):
    host = SchedulerHost()
    host.schedules.create("nightly_dbt", target_kind="command", command=DBT, timeout_seconds=3600)
    with pytest.raises(ServiceError) as info:
        host.schedules.update("nightly_dbt", command={"argv": ["dbt"], "cwd": "relative"}, timeout_seconds=60)
    assert info.value.field == "command.cwd"
    schedule = Schedule.objects.get()
    assert (schedule.command, schedule.timeout_seconds) == (DBT, 3600)


# --- never through run params -------------------------------------------------------------

HOSTILE = {"argv": ["/bin/sh", "-c", "echo pwned"], "command": {"argv": ["rm", "-rf", "/"]}, "shell": "echo pwned",
           "cwd": "/", "env": {"ETL_RUN_ID": "0"}}
ECHO = ("import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), "
        "'params': json.loads(os.environ['ETL_PARAMS']), 'run': os.environ['ETL_RUN_ID']}))")


def _execute(run: Run, now) -> dict:
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, (run.reason, run.error)
    [line] = RunLogLine.objects.filter(run=run, source="stdout").values_list("message", flat=True)
    return json.loads(line)


def test_params_named_argv_or_command_are_data_in_etl_params_never_the_command(make_schedule, now, tmp_path):
    command = {"argv": [PY, "-c", ECHO, "mine"], "cwd": str(tmp_path)}
    schedule = make_schedule("echo", target_kind="command", target_id="", command=command)
    run = run_trigger_manual(schedule=schedule, actor="tests", params=HOSTILE, now=now)
    seen = _execute(run, now)
    assert seen["argv"] == ["mine"] and seen["cwd"] == str(tmp_path)  # the author's command, as written
    assert seen["params"] == HOSTILE and seen["run"] == str(run.pk)  # the params: data, and no ETL_* override
    schedule.refresh_from_db()
    assert schedule.command == command
    assert not AuditEntry.objects.filter(action="schedule.update").exists()


def test_an_events_payload_cannot_set_the_command_either(make_schedule, now, tmp_path):
    command = {"argv": [PY, "-c", ECHO, "mine"]}
    schedule = make_schedule("on_orders", target_kind="command", target_id="", command=command,
                             trigger_kind="event", trigger_config={"topic": "orders.loaded"})
    _event, [run] = event_emit(topic="orders.loaded", payload=HOSTILE, event_id="e1", source="tests", actor="tests",
                               now=now)
    seen = _execute(run, now)
    assert seen["argv"] == ["mine"] and seen["params"] == HOSTILE
    schedule.refresh_from_db()
    assert schedule.command == command


def test_a_webhooks_body_cannot_set_the_command_either(make_schedule, now):
    command = {"argv": [PY, "-c", ECHO, "mine"]}
    schedule = make_schedule("hooked", target_kind="command", target_id="", command=command, trigger_kind="webhook")
    body = json.dumps(HOSTILE).encode()
    headers = sign_webhook(schedule.webhook_secret, body, int(now.timestamp()))
    run = webhook_receive(Delivery(name="hooked", body=body, content_type="application/json",
                                   timestamp=headers["X-Etl-Timestamp"], signature=headers["X-Etl-Signature"],
                                   remote="10.0.0.9"), now=now)
    seen = _execute(run, now)
    assert seen["argv"] == ["mine"] and seen["params"] == HOSTILE
    schedule.refresh_from_db()
    assert schedule.command == command
