"""Failure text that starts with the cause (issue 32, point 9): a real SqlSource run fails on a missing table; its
reason and error begin with the database's own words, the source and window follow, the lists show the first line,
the run keeps the window it read, and a connection's password shows nowhere."""
from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timedelta

import pytest
from django.db import connection

from scheduler.core import Pipeline
from scheduler.models import Run, RunLogLine, RunStatus
from scheduler.pipelines import registry, sql_pool
from scheduler.pipelines.sql import SqlSink, SqlSource
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.timefmt import interval_text

pytestmark = pytest.mark.django_db


def _shown(iso: str) -> str:
    """A stored bound as a person reads it (the one time format; tests read in UTC)."""
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S UTC")
PASSWORD = "pw-h32a-never-shown-7Q"


@pytest.fixture
def source(tmp_path):
    """register(url): `test.events` reads table src_events of `url` into a SQLite warehouse."""
    def register(url: str) -> None:
        def factory(ctx):
            return Pipeline(
                SqlSource(url, table="src_events", watermark_column="updated_at", window=ctx.window), None,
                SqlSink(f"sqlite:///{tmp_path / 'warehouse.sqlite3'}", table="events", key="id", create=True),
                watermark_column="updated_at")
        registry.register_pipeline("test.events", factory, replace=True)

    yield register
    registry._pipelines.pop("test.events", None)
    for idle in sql_pool._idle.values():  # the pooled connection to the test database, so it can be dropped
        for conn in idle:
            conn.close()
    sql_pool._idle.clear()


def _fail(make_schedule, now):
    schedule = make_schedule("events_sync", target_id="test.events", retry_max_attempts=1, watermark_config={
        "type": "datetime", "column": "updated_at", "initial": (now - timedelta(minutes=3)).isoformat()})
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token, clock=lambda: now)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED, run.reason
    return run


def _window(now):
    """The window a run at `now` reads: from the initial mark, 3 minutes back, to now (no lag)."""
    return "2026-03-02T11:57:00+00:00", "2026-03-02T12:00:00+00:00"


def test_a_failed_load_says_the_cause_first_then_the_source_and_window_and_keeps_the_window(
        make_schedule, source, tmp_path, now):
    path = tmp_path / "shop.sqlite3"
    sqlite3.connect(path).close()  # a database without the table
    source(f"sqlite:///{path}")
    run = _fail(make_schedule, now)
    low, high = _window(now)
    cause, context = run.reason.split("\n")
    assert cause == "no such table: src_events"
    assert context == f"while reading SqlSource('sqlite:///{path}', table='src_events', window=[{low}, {high}))"
    assert run.error.startswith(run.reason + "\n\nTraceback (most recent call last)")
    assert run.error.rstrip().endswith(f"EtlError: {run.reason}")  # the traceback's end: where it was raised
    assert (run.window_low, run.window_high) == (low, high)
    assert run.window_text == interval_text(low, high) == f"[{_shown(low)}, {_shown(high)})"


def test_the_pages_show_the_window_read_and_the_lists_the_first_line_of_the_cause(
        make_schedule, source, tmp_path, now, client, django_user_model):
    path = tmp_path / "shop.sqlite3"
    sqlite3.connect(path).close()
    source(f"sqlite:///{path}")
    run = _fail(make_schedule, now)
    low, high = _window(now)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root-x9!"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"<dt>Window</dt><dd>[{_shown(low)}, {_shown(high)})</dd>" in page
    assert re.search(r'<dd id="run-reason">no such table: src_events<br>while reading SqlSource\(', page)
    schedule_page = client.get(f"/schedules/{run.schedule_id}/").content.decode()
    assert '<td data-label="Reason" class="reason">no such table: src_events</td>' in schedule_page
    overview = client.get("/?team=all").content.decode()
    # the failures list's and the needs-attention item's "failing since" line: the cause's first line as the last error
    assert overview.count('last error: <span class="streak-error">no such table: src_events</span>') == 2
    runs_list = client.get("/runs/?team=all").content.decode()
    assert "<td>no such table: src_events</td>" in runs_list and "SqlSource(" not in runs_list


def test_on_postgresql_the_relation_comes_first_and_the_password_shows_nowhere(make_schedule, source, now):
    if connection.vendor != "postgresql":
        pytest.skip("reads the PostgreSQL test database through a URL")
    db = connection.settings_dict
    source(f"postgresql://{db['USER']}:{PASSWORD}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}")
    run = _fail(make_schedule, now)
    low, high = _window(now)
    assert run.reason.startswith('relation "src_events" does not exist\n'), run.reason
    assert run.reason.endswith(f"table='src_events', window=[{low}, {high}))")
    assert "while reading SqlSource('postgresql://" in run.reason and ":***@" in run.reason
    logged = "\n".join(RunLogLine.objects.filter(run=run).values_list("message", flat=True))
    for text in (run.reason, run.error, logged):
        assert PASSWORD not in text
    assert Run.objects.get(pk=run.pk).window_text == f"[{_shown(low)}, {_shown(high)})"
