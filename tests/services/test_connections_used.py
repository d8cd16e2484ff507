"""Connections used by name: commands, pipelines, the HTTP source, alert channels, dbt; only by the owning team
(issue 33, point 2)."""
from __future__ import annotations

import hashlib
import json
import sqlite3
import sys

import pytest
from cryptography.fernet import Fernet

from scheduler.core import Pipeline
from scheduler.core.masking import MASK
from scheduler.models import RunLogLine, RunStatus, Schedule, Team
from scheduler.pipelines import registry
from scheduler.pipelines.connections import connection_scope
from scheduler.pipelines.http import HttpJsonSource
from scheduler.pipelines.sql import SqlSink, SqlSource
from scheduler.services.oversight import channel_probe as channel_tests
from scheduler.services.integrations.channels import expand_channel
from scheduler.services.access.connections import connection_set, connections_env
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.common.errors import ServiceError
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual
from tests.api.conftest import api, make_token  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db
PASSWORD = "Wh-pa55word-used-by-name-3e"
URL = f"postgresql://loader:{PASSWORD}@db.example:5432/dwh?sslmode=require"


@pytest.fixture(autouse=True)
def keys(settings):
    settings.ETL_CONNECTION_KEYS = [Fernet.generate_key().decode()]


@pytest.fixture
def analytics(db):
    team = Team.objects.create(name="analytics")
    connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    return team


def _execute(schedule, now):
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    return run


def _stdout(run) -> list[str]:
    return list(RunLogLine.objects.filter(run=run, source="stdout").order_by("seq").values_list("message", flat=True))


def test_a_command_gets_its_declared_connection_as_env_vars_and_its_log_masks_the_secret(analytics, make_schedule,
                                                                                        now):
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    check = ("import hashlib, os, sys; e = os.environ; "
             "[print(k + '=' + e[k]) for k in sorted(e) if k.startswith('ETL_CONN_')]; "
             f"sys.exit(0 if hashlib.sha256(e['ETL_CONN_WAREHOUSE_PASSWORD'].encode()).hexdigest() == {digest!r} "
             "else 3)")
    schedule = make_schedule("load", owner="analytics", target_kind="command", target_id="",
                             command={"argv": [sys.executable, "-c", check], "connections": ["warehouse"]})
    run = _execute(schedule, now)
    assert run.status == RunStatus.SUCCEEDED, (run.reason, run.error)
    printed = dict(line.split("=", 1) for line in _stdout(run))
    assert printed == {
        "ETL_CONN_WAREHOUSE_DATABASE": "dwh", "ETL_CONN_WAREHOUSE_HOST": "db.example", "ETL_CONN_WAREHOUSE_KIND":
        "postgres", "ETL_CONN_WAREHOUSE_PASSWORD": MASK, "ETL_CONN_WAREHOUSE_PORT": "5432",
        "ETL_CONN_WAREHOUSE_SCHEME": "postgresql", "ETL_CONN_WAREHOUSE_SSLMODE": "require",
        "ETL_CONN_WAREHOUSE_URL": f"postgresql://loader:{MASK}@db.example:5432/dwh?sslmode=require",
        "ETL_CONN_WAREHOUSE_USER": "loader",
    }


def test_another_teams_schedule_may_not_declare_it_at_any_door(analytics, make_schedule, api, make_token, make_user,
                                                               dbt_dir):
    with pytest.raises(ServiceError) as info:
        make_schedule("theirs", target_kind="command", target_id="",
                      command={"argv": ["true"], "connections": ["warehouse"]})
    assert "command.connections" in [e.field for e in info.value.errors]
    assert "may not use connection 'warehouse'" in str(info.value)
    with pytest.raises(ServiceError) as info:
        make_schedule("theirs", target_kind="dbt", target_id="",
                      dbt={"project_dir": dbt_dir, "connections": ["warehouse"]})
    assert "dbt.connections" in [e.field for e in info.value.errors]
    response = api.post("/schedules", {"name": "theirs", "target_kind": "command", "target_id": "",
                                       "trigger_kind": "manual",
                                       "command": {"argv": ["true"], "connections": ["warehouse"]}},
                        token=make_token(make_user("ada", "admin")))  # acting for every team grants no more
    assert response.status_code == 422 and "command.connections" in response.content.decode()
    with pytest.raises(ServiceError, match="unknown connection 'nope'"):
        make_schedule("x", owner="analytics", target_kind="command", target_id="",
                      command={"argv": ["true"], "connections": ["nope"]})
    assert not Schedule.objects.filter(name__in=["theirs", "x"]).exists()


@pytest.fixture
def dbt_dir(tmp_path):
    return str(tmp_path)


def test_a_schedule_given_to_another_team_after_it_was_saved_fails_at_run_time(analytics, make_schedule, now,
                                                                              default_team):
    schedule = make_schedule("load", owner="analytics", target_kind="command", target_id="", retry_max_attempts=3,
                             command={"argv": ["true"], "connections": ["warehouse"]})
    Schedule.objects.filter(pk=schedule.pk).update(owner=default_team)  # past the save-time check
    run = _execute(Schedule.objects.get(pk=schedule.pk), now)
    assert run.status == RunStatus.FAILED and run.attempt == 1  # permanent: the same definition fails again
    assert "may not use connection 'warehouse'" in run.reason and PASSWORD not in run.error


def test_sql_source_and_sink_take_a_connections_name_for_the_owning_teams_run_only(analytics, make_schedule, now,
                                                                                  tmp_path):
    source, target = tmp_path / "source.sqlite3", tmp_path / "target.sqlite3"
    with sqlite3.connect(source) as db:
        db.execute("create table orders (id integer primary key, total real)")
        db.execute("insert into orders values (1, 9.5), (2, 20)")
    connection_set(name="shop", actor="tests", owner="analytics", url=f"sqlite:///{source}")
    connection_set(name="dwh", actor="tests", owner="analytics", url=f"sqlite:///{target}")
    registry.register_pipeline("test.by_name", lambda ctx: Pipeline(
        SqlSource(connection="shop", table="orders"), None,
        SqlSink(connection="dwh", table="orders", key="id", create=True)), replace=True)
    try:
        run = _execute(make_schedule("copy", owner="analytics", target_id="test.by_name"), now)
        assert run.status == RunStatus.SUCCEEDED and run.rows_loaded == 2, (run.reason, run.error)
        with sqlite3.connect(target) as db:
            assert db.execute("select count(*) from orders").fetchone() == (2,)
        theirs = _execute(make_schedule("steal", target_id="test.by_name", retry_max_attempts=1), now)
    finally:
        registry._pipelines.pop("test.by_name", None)
    assert theirs.status == RunStatus.FAILED and "may not use connection 'shop'" in theirs.reason


def test_the_http_source_takes_a_connections_base_url_and_token(analytics, make_schedule):
    connection_set(name="shop_api", actor="tests", owner="analytics", kind="http", host="api.example.com",
                   database="/v2", password="api-bearer-token-771", extra={"scheme": "https"})
    schedule = make_schedule("pull", owner="analytics")
    with connection_scope(schedule):
        source = HttpJsonSource(connection="shop_api", path="orders", params={"page": "1"})
    assert source.request_url() == "https://api.example.com/v2/orders?page=1"
    assert source.headers["Authorization"] == "Bearer api-bearer-token-771"
    assert "api-bearer-token-771" not in repr(source)
    with connection_scope(make_schedule("other")), pytest.raises(Exception, match="may not use connection"):
        HttpJsonSource(connection="shop_api")


def test_an_alert_channel_names_the_teams_smtp_connection(analytics, make_schedule):
    connection_set(name="mail", actor="tests", owner="analytics", kind="smtp", host="smtp.example.com", port=587,
                   login="alerts", password="smtp-pass-word-42")
    schedule = make_schedule("watched", owner="analytics", alert_channels="conn://mail?to=ops@example.com")
    url = expand_channel(schedule.alert_channels, owner_id=analytics.pk, who="t")
    assert url.startswith("mailtos://alerts:smtp-pass-word-42@smtp.example.com:587?")
    assert "to=ops%40example.com" in url and "smtp=smtp.example.com" in url
    with pytest.raises(ServiceError) as info:
        make_schedule("theirs", alert_channels="conn://mail?to=ops@example.com")
    assert "may not use connection 'mail'" in str(info.value)
    with pytest.raises(ServiceError, match="smtp connection, not a postgres one"):
        make_schedule("wrong", owner="analytics", alert_channels="conn://warehouse?to=ops@example.com")


def test_dbt_gets_the_secret_parts_only_as_dbt_env_secret_variables(analytics, make_schedule):
    schedule = make_schedule("marts", owner="analytics")
    env = connections_env(["warehouse"], schedule=schedule, for_dbt=True)
    assert env["ETL_CONN_WAREHOUSE_HOST"] == "db.example" and env["ETL_CONN_WAREHOUSE_USER"] == "loader"
    assert env["DBT_ENV_SECRET_ETL_CONN_WAREHOUSE_PASSWORD"] == PASSWORD
    assert env["DBT_ENV_SECRET_ETL_CONN_WAREHOUSE_URL"] == URL
    assert not any(PASSWORD in value for key, value in env.items() if not key.startswith("DBT_ENV_SECRET_"))


def test_the_test_button_sends_through_the_connection_and_shows_no_password(analytics, make_schedule, monkeypatch):
    connection_set(name="mail", actor="tests", owner="analytics", kind="smtp", host="smtp.example.com", port=587,
                   login="alerts", password="smtp-pass-word-42")
    schedule = make_schedule("watched", owner="analytics", alert_channels="conn://mail?to=ops@example.com")
    sent = []
    monkeypatch.setattr(channel_tests, "send_channel", lambda url, **kw: sent.append(url) or (_ for _ in ()).throw(
        RuntimeError(f"SMTP login refused for {url}")))
    answer = channel_tests.channel_test_send(target=schedule, index=0, actor="tests")
    assert sent and sent[0].startswith("mailtos://alerts:smtp-pass-word-42@smtp.example.com")
    assert answer["ok"] is False and "smtp-pass-word-42" not in json.dumps(answer)
    assert answer["channel"] == "conn://mail?to=ops@example.com"
