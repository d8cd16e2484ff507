"""Run params stay data at dbt's door (issue 33, point 5).

The probe's payload, a Jinja expression that would raise the server's SECRET_KEY and a query's answer
through dbt's compiler, goes through every door that takes a dbt run's params: each refuses it naming the
key, changes nothing, and a run carrying it anyway (stored before the rule) fails before dbt starts, with
nothing rendered and no secret in its log, error or reason.
"""
from __future__ import annotations

import json
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from scheduler.core import PermanentError
from scheduler.host import SchedulerHost
from scheduler.models import Run, RunStatus, TriggerKind
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.worker.dbt import dbt_vars
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.rerun import run_rerun_from_failure
from scheduler.services.runs.rerun import run_rerun
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.admission.webhooks import sign_webhook
from tests.api.conftest import admin_token, admin_user, make_token  # noqa: F401 - fixtures
from tests.dbt.conftest import dbt_schedule, execute, log_of
from tests.security.hostile import counts

# committed rows: a build outlasts a heartbeat, and the pump beats on its own connection, which sees only what is
# committed (inside a test's transaction its beat touches nothing on PostgreSQL and fences the run, as it should)
pytestmark = pytest.mark.django_db(transaction=True)
PROBE = "{{ exceptions.raise_compiler_error(env_var('SECRET_KEY') ~ run_query('select 6*7')) }}"
SECRET = "probe-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
MARK = {"type": "integer", "column": "id", "initial": 0}


def dbt_schedule_with(make_schedule, project, name, **fields):
    spec = {"project_dir": str(project), "profiles_dir": str(project)}
    return make_schedule(name, target_kind="dbt", target_id="", dbt=spec, retry_max_attempts=1, **fields)


@pytest.fixture
def server_secret(settings, monkeypatch):
    """The server's SECRET_KEY, in its settings and in the worker's environment as the probe found it."""
    settings.SECRET_KEY = SECRET
    monkeypatch.setenv("SECRET_KEY", SECRET)
    return SECRET


@pytest.fixture
def marts(make_schedule, dbt_project, operator):
    return dbt_schedule(make_schedule, dbt_project)


@pytest.mark.parametrize("params, field", [
    ({"region": PROBE}, "params.region"),
    ({"outer": {"inner": ["ok", "{% do run_query('drop table x') %}"]}}, "params.outer.inner[1]"),
    ({"note": "{# a comment is a template too #}"}, "params.note"),
])
def test_the_one_check_names_the_key_at_any_depth(marts, params, field):
    before = counts()
    with pytest.raises(ServiceError) as info:
        run_trigger_manual(schedule=marts, actor="tests", params=params)
    assert info.value.field == field and "template" in info.value.problem
    assert PROBE not in str(info.value)  # the message names the key, never quotes the payload
    assert counts() == before


def test_a_key_holding_a_template_is_refused_and_plain_braces_pass(marts):
    with pytest.raises(ServiceError) as info:
        run_trigger_manual(schedule=marts, actor="tests", params={"{{ x }}": 1})
    assert info.value.field == "params" and "key" in info.value.problem
    run = run_trigger_manual(schedule=marts, actor="tests", params={"json": '{"a": {"b": 1}}', "set": "}} %}"})
    assert run.params["json"] == '{"a": {"b": 1}}'


def test_the_run_now_page_refuses_it(client, operator, marts):
    client.force_login(operator)
    before = counts()
    response = client.post(reverse("scheduler:schedule_run_now", args=[marts.pk]),
                           {"params": json.dumps({"region": PROBE})})
    assert response.status_code == 400
    assert "region" in response.content.decode() and "template" in response.content.decode()
    assert counts() == before


def test_the_trigger_command_refuses_it(marts):
    before = counts()
    with pytest.raises(CommandError) as info:
        call_command("trigger", marts.name, "--param", f"region={PROBE}", stdout=StringIO())
    assert info.value.returncode == 2 and "params.region" in str(info.value)
    assert counts() == before


def test_the_api_refuses_it_with_a_422_naming_the_key(admin_token, marts):
    before = counts()
    response = Client().post(f"/api/v1/schedules/{marts.name}/runs", data=json.dumps({"params": {"region": PROBE}}),
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {admin_token}")
    assert response.status_code == 422, response.content[:300]
    assert response.json()["errors"][0]["field"] == "params.region"
    assert counts() == before


def test_the_facade_refuses_it(marts):
    before = counts()
    with pytest.raises(ServiceError) as info:
        SchedulerHost().trigger_manual(marts.name, {"region": PROBE}, actor="system")
    assert info.value.field == "params.region"
    assert counts() == before


def test_an_event_carrying_it_is_a_400_and_no_run(client, make_schedule, dbt_project, settings):
    settings.ETL_EVENT_TOKENS = ["tok"]
    dbt_schedule_with(make_schedule, dbt_project, "on_orders", trigger_kind="event",
                      trigger_config={"topic": "orders"})
    before = counts()
    response = client.post("/api/events/orders", data=json.dumps({"region": PROBE}), content_type="application/json",
                           headers={"Authorization": "Bearer tok"})
    assert response.status_code == 400
    assert response.json()["field"] == "payload.region" and "on_orders" in response.json()["error"]
    with pytest.raises(CommandError):
        call_command("emit_event", "orders", "--payload", json.dumps({"region": PROBE}), "--actor", "cli",
                     stdout=StringIO())
    assert counts() == before


def test_a_webhook_body_carrying_it_is_a_400_and_no_run(client, make_schedule, dbt_project):
    hook = dbt_schedule_with(make_schedule, dbt_project, "hooked", trigger_kind="webhook")
    body = json.dumps({"region": PROBE}).encode()
    before = counts(audit=False)
    response = client.post(f"/hooks/{hook.name}", data=body, content_type="application/json",
                           headers=sign_webhook(hook.webhook_secret, body, int(time.time())))
    assert response.status_code == 400 and response.json()["field"] == "body.region"
    assert counts(audit=False) == before


def test_a_backfill_carrying_it_is_refused_at_the_service_the_api_and_the_command(admin_token, make_schedule,
                                                                                 dbt_project):
    schedule = dbt_schedule_with(make_schedule, dbt_project, "marks", watermark_config=MARK)
    before = counts()
    with pytest.raises(ServiceError) as info:
        backfill_submit(schedule=schedule, start=0, end=10, window=5, reason="r", requested_by="tests",
                        params={"region": PROBE})
    assert "params.region" in [e.field for e in info.value.errors]
    response = Client().post("/api/v1/backfills", content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {admin_token}",
                             data=json.dumps({"schedule": "marks", "from": "0", "to": "10", "window": 5, "reason": "r",
                                              "params": {"region": PROBE}}))
    assert response.status_code == 422 and "params.region" in response.content.decode()
    with pytest.raises(CommandError) as failed:
        call_command("backfill", "marks", "--from", "0", "--to", "10", "--window", "5", "--reason", "r",
                     "--param", f"region={PROBE}", stdout=StringIO())
    assert "params.region" in str(failed.value)
    assert counts() == before


def test_a_schedules_default_params_and_vars_cannot_hold_it_at_any_door(admin_token, dbt_project, standard_class,
                                                                        tmp_path):
    spec = {"project_dir": str(dbt_project), "profiles_dir": str(dbt_project)}
    data = {"name": "m", "target_kind": "dbt", "dbt": spec, "trigger_kind": "manual"}
    before = counts()
    with pytest.raises(ServiceError) as info:
        schedule_save(data={**data, "params": {"region": PROBE}}, actor="tests")
    assert "params.region" in [e.field for e in info.value.errors]
    with pytest.raises(ServiceError) as info:
        schedule_save(data={**data, "dbt": {**spec, "vars": {"region": PROBE}}}, actor="tests")
    assert "dbt.vars.region" in [e.field for e in info.value.errors]
    response = Client().post("/api/v1/schedules", content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {admin_token}",
                             data=json.dumps({**data, "params": {"r": PROBE}}))
    assert response.status_code == 422 and "params.r" in response.content.decode()
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({"schedules": [{**data, "params": {"region": PROBE}}]}))
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply_schedules", str(path), stdout=StringIO(), stderr=err)
    assert "params.region" in err.getvalue()
    assert counts() == before


def _stored_with_probe(schedule, now, status=RunStatus.FAILED) -> Run:
    """A run whose params hold the probe, written straight to the database (as one stored before the rule)."""
    return Run.objects.create(
        schedule=schedule, trigger_kind=TriggerKind.MANUAL, trigger_key=f"old:{status}", params={"region": PROBE},
        workload_class_id=schedule.workload_class_id, status=status, queued_at=now, finished_at=now, logical_time=now,
    )


def test_a_rerun_of_a_run_stored_with_it_is_refused_at_each_door(admin_token, marts, now):
    old = _stored_with_probe(marts, now)
    before = counts()
    for rerun in (lambda: run_rerun(run=old, actor="tests"), lambda: run_rerun_from_failure(run=old, actor="tests")):
        with pytest.raises(ServiceError) as info:
            rerun()
        assert info.value.field == "params.region"
    for body in ({}, {"from_failure": True}):
        response = Client().post(f"/api/v1/runs/{old.pk}/rerun", data=json.dumps(body), content_type="application/json",
                                 HTTP_AUTHORIZATION=f"Bearer {admin_token}")
        assert response.status_code == 422 and response.json()["errors"][0]["field"] == "params.region"
    assert counts() == before


def test_a_run_that_carries_it_anyway_fails_before_dbt_starts_and_nothing_is_rendered(
        marts, warehouse, now, server_secret):
    run = _stored_with_probe(marts, now, status=RunStatus.QUEUED)
    run = execute(run, now)
    assert run.status == RunStatus.FAILED
    assert "params.region" in run.reason and "dbt was not started" in run.reason
    assert "permanent" in run.reason and run.attempt == 1  # not retried: the same params would fail again
    lines = log_of(run)
    assert not any(line.startswith("command: ") for line in lines)  # dbt never ran
    text = "\n".join([*lines, run.reason, run.error])
    assert server_secret not in text and "raise_compiler_error" not in text  # named, never quoted or rendered
    assert not warehouse.exists()  # dbt did not even open the warehouse


def test_dbt_vars_refuses_a_template_itself():
    with pytest.raises(PermanentError) as info:
        dbt_vars(spec={}, run_id=1, schedule="m", window=None, logical_time=None, params={"a": [PROBE]}, attempt=1,
                 backfill=None)
    assert "params.a[0]" in str(info.value) and PROBE not in str(info.value)

