"""Run params are data: a path, host or unknown key is refused at every door that takes params (issue 22)."""
from __future__ import annotations

import json
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from scheduler.core import ConfigError
from scheduler.host import SchedulerHost
from scheduler.pipelines import RunContext, get_pipeline
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.admission.webhooks import sign_webhook
from tests.api.conftest import admin_token, admin_user, make_token  # noqa: F401 - fixtures
from tests.security.hostile import counts

pytestmark = pytest.mark.django_db
STEER = {"day": "2026-03-01", "warehouse_db": "/srv/etl/var/db.sqlite3"}
REPORT = "demo.daily_report"  # a pipeline that writes a file: exactly what a param must not be able to steer


def test_the_run_now_form_refuses_an_unknown_key_naming_it(client, operator, make_schedule):
    client.force_login(operator)
    schedule = make_schedule("orders", target_id=REPORT)
    before = counts()
    response = client.post(reverse("scheduler:schedule_run_now", args=[schedule.pk]), {"params": json.dumps(STEER)})
    assert response.status_code == 400
    page = response.content.decode()
    assert "warehouse_db" in page and "unknown key (this pipeline takes: day)" in page
    assert counts() == before


def test_the_trigger_command_refuses_an_unknown_key(make_schedule):
    make_schedule("orders", target_id=REPORT)
    before = counts()
    with pytest.raises(CommandError) as info:
        call_command("trigger", "orders", "--param", "warehouse_db=/tmp/x.sqlite3", stdout=StringIO())
    assert info.value.returncode == 2 and "params.warehouse_db" in str(info.value)
    assert counts() == before


def test_the_api_refuses_an_unknown_key_naming_it(admin_token, make_schedule):
    make_schedule("orders", target_id=REPORT)
    before = counts()
    response = Client().post("/api/v1/schedules/orders/runs", data=json.dumps({"params": STEER}),
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {admin_token}")
    assert response.status_code == 422, response.content[:300]
    assert response.json()["errors"][0]["field"] == "params.warehouse_db"
    assert counts() == before


def test_the_facade_refuses_an_unknown_key_and_a_wrong_type(make_schedule):
    make_schedule("orders", target_id=REPORT)
    before = counts()
    with pytest.raises(ServiceError) as info:
        SchedulerHost().trigger_manual("orders", STEER, actor="system")
    assert info.value.field == "params.warehouse_db"
    with pytest.raises(ServiceError) as info:
        SchedulerHost().trigger_manual("orders", {"day": ["not", "a", "date"]}, actor="system")
    assert info.value.field == "params.day"
    assert counts() == before


def test_an_event_whose_payload_would_steer_a_pipeline_is_a_400(client, make_schedule, settings):
    settings.ETL_EVENT_TOKENS = ["tok"]
    make_schedule("confirmed", target_id="demo.order_confirmed", trigger_kind="event",
                  trigger_config={"topic": "orders"})
    before = counts()
    response = client.post("/api/events/orders", data=json.dumps({"order_id": 7, "warehouse_db": "/tmp/x"}),
                           content_type="application/json", headers={"Authorization": "Bearer tok"})
    assert response.status_code == 400
    assert response.json()["field"] == "payload.warehouse_db" and "confirmed" in response.json()["error"]
    assert counts() == before


def test_a_webhook_body_that_would_steer_a_pipeline_is_a_400(client, make_schedule):
    hook = make_schedule("ingest", target_id="demo.webhook_ingest", trigger_kind="webhook")
    body = json.dumps({"records": [{"id": 1}], "warehouse_db": "/tmp/x"}).encode()
    before = counts(audit=False)
    response = client.post(f"/hooks/{hook.name}", data=body, content_type="application/json",
                           headers=sign_webhook(hook.webhook_secret, body, int(time.time())))
    assert response.status_code == 400
    assert response.json()["field"] == "body.warehouse_db"
    assert counts(audit=False) == before


def test_a_schedule_cannot_carry_a_path_in_its_params(standard_class):
    with pytest.raises(ServiceError) as info:
        schedule_save(data={"name": "r", "target_id": "demo.daily_report", "trigger_kind": "manual",
                            "params": {"report_dir": "/etc"}}, actor="tests")
    assert "params.report_dir" in [e.field for e in info.value.errors]
    schedule_save(data={"name": "r", "target_id": "demo.daily_report", "trigger_kind": "manual",
                        "params": {"day": "2026-03-01"}}, actor="tests")


def test_a_schedules_file_cannot_carry_a_path_in_params(tmp_path, standard_class):
    path = tmp_path / "s.yaml"
    path.write_text("schedules:\n  - name: r\n    target_id: demo.daily_report\n    trigger_kind: manual\n"
                    "    params: {report_dir: /etc}\n")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply_schedules", str(path), stdout=StringIO(), stderr=err)
    assert "params.report_dir: unknown key" in err.getvalue()


# --- where the demo's files may be ------------------------------------------------------------

def _ctx():
    return RunContext(1, "demo", None, {}, None)


def test_a_setting_that_resolves_outside_the_files_dir_is_refused_symlinks_included(tmp_path, settings):
    files, outside = tmp_path / "files", tmp_path / "outside"
    files.mkdir()
    outside.mkdir()
    (files / "warehouse.db").symlink_to(outside / "warehouse.db")
    settings.ETL_FILES_DIR = str(files)
    settings.ETL_DEMO_WAREHOUSE_DB = str(files / "warehouse.db")
    with pytest.raises(ConfigError) as info:
        get_pipeline("demo.revenue_transform").build(_ctx())
    assert info.value.field == "ETL_DEMO_WAREHOUSE_DB" and "outside ETL_FILES_DIR" in info.value.problem
    settings.ETL_DEMO_WAREHOUSE_DB = str(files / ".." / "outside" / "w.db")
    with pytest.raises(ConfigError):
        get_pipeline("demo.revenue_transform").build(_ctx())
    assert not (outside / "warehouse.db").exists() and not (outside / "w.db").exists()


def test_the_schedulers_own_database_is_refused_even_inside_the_files_dir(tmp_path, settings):
    settings.ETL_FILES_DIR = str(tmp_path)
    own = tmp_path / "db.sqlite3"
    settings.DATABASES = {**settings.DATABASES, "other": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(own)}}
    settings.ETL_DEMO_WAREHOUSE_DB = str(own)
    with pytest.raises(ConfigError) as info:
        get_pipeline("demo.revenue_transform").build(_ctx())
    assert "own database" in info.value.problem and not own.exists()


def test_a_backfill_refuses_an_unknown_key(make_schedule):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("wm", target_id="demo.orders_sync",
                             watermark_config={"type": "integer", "column": "id", "initial": 0})
    before = counts()
    with pytest.raises(ServiceError) as info:
        backfill_submit(schedule=schedule, start=0, end=10, window=5, reason="r", requested_by="tests",
                        params={"source_db": "/etc/passwd"})
    assert "params.source_db" in [e.field for e in info.value.errors]
    assert counts() == before


def test_demo_noop_reads_nothing_so_other_keys_pass_as_data_but_rows_is_checked(make_schedule):
    make_schedule("stub")
    assert SchedulerHost().trigger_manual("stub", {"rows": 2, "anything": "data"}, actor="system")
    with pytest.raises(ServiceError) as info:
        SchedulerHost().trigger_manual("stub", {"rows": "many"}, actor="system")
    assert info.value.field == "params.rows"


def test_run_pipeline_refuses_an_unknown_key(settings):
    with pytest.raises(CommandError) as info:
        call_command("run_pipeline", "demo.daily_report", "--param", "report_dir=/tmp", stdout=StringIO())
    assert info.value.returncode == 2 and "params.report_dir: unknown key" in str(info.value)
