"""The outbox: written with the run's state change, sent in order by the leased loop, retried with back-off,
pruned once sent, its backlog a metric; configured the OpenLineage client's standard way."""
from __future__ import annotations

import json
import os
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.metrics import render_metrics
from scheduler.models import LineageEvent, LineageStatus, Run, RunStatus, WorkloadClass
from scheduler.services.cluster.batch import execute_runs
from scheduler.services.runs.lost import runs_lost
from scheduler.services.integrations.lineage import lineage_enabled, lineage_reset
from scheduler.services.integrations.lineage_send import (
    lineage_backoff,
    lineage_client_reset,
    lineage_drain,
    lineage_tick,
)
from scheduler.services.runs.queue import run_trigger_manual
from tests.lineage.conftest import outbox
from tests.services.semantics_helpers import claim_then_go_silent, tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
P = LineageStatus


def _one_run(make_schedule, now, name="noop"):
    schedule = make_schedule(name)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    return run


def test_events_reach_an_http_receiver_start_then_complete(lineage_on, make_schedule, now, receiver):
    run = _one_run(make_schedule, now)
    assert lineage_tick(now=now, client=receiver.client()) == {"sent": 2, "failed": 0, "dead": 0, "pruned": 0}
    assert [e["eventType"] for e in receiver.events] == ["START", "COMPLETE"]
    assert {e["path"] for e in receiver.events} == {"/api/v1/lineage"}
    assert len({e["run"]["runId"] for e in receiver.events}) == 1
    sent = list(LineageEvent.objects.values_list("status", "attempts", "sent_at", "run_id"))
    assert sent == [(P.SENT, 1, now, run.pk)] * 2


def test_a_down_receiver_loses_nothing_backs_off_and_delivers_when_it_is_back(lineage_on, make_schedule, now,
                                                                            receiver, settings):
    settings.ETL_LINEAGE_RETRY_SECONDS, settings.ETL_LINEAGE_RETRY_MAX_SECONDS = 10, 25
    run = _one_run(make_schedule, now)
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, "the run never waits for the backend"
    receiver.down = True
    client = receiver.client()

    out = lineage_tick(now=now, client=client)
    assert (out["sent"], out["failed"]) == (0, 1), "one try per tick while the backend is down"
    first = LineageEvent.objects.order_by("id").first()
    assert (first.status, first.attempts, first.next_attempt_at) == (P.PENDING, 1, now + timedelta(seconds=10))
    assert "503" in first.last_error
    # backing off: not due, and the run's later event waits behind it (order per run)
    assert lineage_tick(now=now + timedelta(seconds=5), client=client)["sent"] == 0
    assert receiver.tries == 1
    lineage_tick(now=now + timedelta(seconds=10), client=client)
    first.refresh_from_db()
    assert (first.attempts, first.next_attempt_at) == (2, now + timedelta(seconds=30))
    assert lineage_backoff(3) == 25, "capped"
    assert LineageEvent.objects.filter(status=P.PENDING).count() == 2

    receiver.down = False
    assert lineage_tick(now=now + timedelta(seconds=30), client=client)["sent"] == 2
    assert [e["eventType"] for e in receiver.events] == ["START", "COMPLETE"]
    first.refresh_from_db()
    assert (first.status, first.attempts, first.last_error) == (P.SENT, 3, "")


def test_a_receiver_that_is_not_listening_is_a_failed_try_too(lineage_on, make_schedule, now, receiver):
    _one_run(make_schedule, now)
    client = receiver.client()
    receiver.stop()
    assert lineage_drain(client=client, now=now) == {"sent": 0, "failed": 1, "dead": 0, "pending": 2}
    assert "Connection" in LineageEvent.objects.order_by("id").first().last_error


def test_an_event_is_given_up_after_the_max_attempts(lineage_on, make_schedule, now, receiver, settings):
    settings.ETL_LINEAGE_MAX_ATTEMPTS = 2
    _one_run(make_schedule, now)
    receiver.down = True
    lineage_drain(client=receiver.client(), now=now, retry_now=True)
    out = lineage_drain(client=receiver.client(), now=now, retry_now=True)
    assert out["dead"] == 1
    assert list(LineageEvent.objects.order_by("id").values_list("status", "attempts")) == [(P.DEAD, 2), (P.PENDING, 0)]


def test_sent_events_are_pruned_after_the_retention(lineage_on, make_schedule, now, file_lineage, settings):
    settings.ETL_LINEAGE_RETENTION_HOURS = 24
    _one_run(make_schedule, now)
    lineage_drain(client=file_lineage.client, now=now)
    assert lineage_tick(now=now + timedelta(hours=23), client=file_lineage.client)["pruned"] == 0
    assert lineage_tick(now=now + timedelta(hours=25), client=file_lineage.client)["pruned"] == 2
    assert not LineageEvent.objects.exists()


def test_the_backlog_is_a_metric(lineage_on, make_schedule, now):
    _one_run(make_schedule, now)
    text = render_metrics(clock=lambda: now + timedelta(seconds=30)).decode()
    assert "etl_lineage_outbox_pending 2.0" in text
    assert "etl_lineage_outbox_dead 0.0" in text
    assert "etl_lineage_outbox_oldest_pending_seconds 30.0" in text


def test_a_workers_batch_writes_its_end_events_with_one_insert(lineage_on, make_schedule, now):
    schedule = make_schedule("many")
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=5)
    for i in range(3):
        run_trigger_manual(schedule=schedule, actor="tests", now=now + timedelta(microseconds=i))
    pairs = tick(now)
    assert len(pairs) == 3
    with CaptureQueriesContext(connection) as queries:
        out = execute_runs(pairs, clock=lambda: now)
    assert set(out.values()) == {RunStatus.SUCCEEDED}
    inserts = [q["sql"] for q in queries if re.match(r'INSERT INTO "?scheduler_lineageevent"?', q["sql"])]
    assert len(inserts) == 3 + 1, "one START per claim, then the batch's three ends in one statement"
    assert [e for e, _ in outbox()] == ["START"] * 3 + ["COMPLETE"] * 3


def test_lineage_is_off_when_nothing_is_configured_and_on_with_the_clients_variables(settings, monkeypatch, tmp_path,
                                                                                    make_schedule, now):
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.ETL_LINEAGE = "auto"
    lineage_reset()
    assert not lineage_enabled(), "auto with nothing configured: off (the client would print to the console)"
    _one_run(make_schedule, now, "before")
    assert not LineageEvent.objects.exists()

    path = tmp_path / "events.jsonl"
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__TYPE", "file")
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__LOG_FILE_PATH", str(path))
    monkeypatch.setenv("OPENLINEAGE__TRANSPORT__APPEND", "true")
    lineage_reset()
    lineage_client_reset()
    try:
        assert lineage_enabled()
        _one_run(make_schedule, now, "after")
        call_command("lineage_flush")  # the client as configured by the environment
        assert [json.loads(line)["eventType"] for line in path.read_text().splitlines()] == ["START", "COMPLETE"]
        settings.ETL_LINEAGE = "off"
        assert not lineage_enabled(), "the setting switches it off whatever is configured"
    finally:
        lineage_reset()
        lineage_client_reset()


def test_an_openlineage_yml_in_the_working_directory_switches_it_on(settings, monkeypatch, tmp_path):
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    settings.ETL_LINEAGE = "auto"
    (tmp_path / "openlineage.yml").write_text("transport:\n  type: console\n")
    lineage_reset()
    try:
        assert lineage_enabled()
    finally:
        lineage_reset()


def test_lineage_flush_prints_counts_as_json(lineage_on, make_schedule, now, receiver, capsys, monkeypatch):
    _one_run(make_schedule, now)
    monkeypatch.setattr("scheduler.services.integrations.lineage_send._client", receiver.client())
    call_command("lineage_flush", "--json")
    assert json.loads(capsys.readouterr().out) == {"sent": 2, "failed": 0, "dead": 0, "pending": 0}


def test_lost_runs_settled_in_bulk_write_their_fail_events_with_one_insert(lineage_on, make_schedule, now):
    schedule = make_schedule("lost", retry_max_attempts=1)
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=5)
    for i in range(2):
        run_trigger_manual(schedule=schedule, actor="tests", now=now + timedelta(microseconds=i))
    lost = [claim_then_go_silent(run_id, token, now) for run_id, token in tick(now)]
    with CaptureQueriesContext(connection) as queries:
        out = runs_lost(runs=lost, now=now + timedelta(minutes=5))
    assert sorted(out["failed"]) == sorted(r.pk for r in lost)
    inserts = [q["sql"] for q in queries if re.match(r'INSERT INTO "?scheduler_lineageevent"?', q["sql"])]
    assert len(inserts) == 1
    assert [e for e, _ in outbox()] == ["FAIL", "FAIL"]


def test_openlineage_url_alone_switches_it_on_and_the_client_posts_there(settings, monkeypatch, tmp_path,
                                                                         make_schedule, now, receiver):
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OPENLINEAGE_URL", receiver.url)
    settings.ETL_LINEAGE = "auto"
    lineage_reset()
    lineage_client_reset()
    try:
        assert lineage_enabled()
        _one_run(make_schedule, now)
        assert lineage_drain(now=now)["sent"] == 2  # the process's client, as the environment configures it
        assert [(e["path"], e["eventType"]) for e in receiver.events] == [
            ("/api/v1/lineage", "START"), ("/api/v1/lineage", "COMPLETE")]
        monkeypatch.setenv("OPENLINEAGE_DISABLED", "true")
        lineage_reset()
        assert not lineage_enabled(), "the client's own switch turns it off"
    finally:
        lineage_reset()
        lineage_client_reset()
