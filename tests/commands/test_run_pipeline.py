import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


def test_it_runs_a_pipeline_inline_and_prints_the_report():
    out = StringIO()
    call_command("run_pipeline", "demo.noop", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert [r["task_id"] for r in report["records"]] == ["demo.noop"]
    assert report["records"][0]["outcome"] == "SUCCESS"


def test_a_failing_pipeline_exits_1_with_the_reason():
    out = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("run_pipeline", "demo.flaky", "--param", "fail=true", stdout=out)
    assert info.value.returncode == 1
    assert "FAILED" in out.getvalue() and "failed on purpose" in out.getvalue()


def test_an_unknown_pipeline_exits_2_naming_it():
    with pytest.raises(CommandError) as info:
        call_command("run_pipeline", "no.such")
    assert info.value.returncode == 2 and "no.such" in str(info.value)


# --- one window (issue 32): `--window LOW HIGH`, `--logical-time`, and scheduler.testing.run_window -------------

@pytest.fixture
def window_seen():
    """`test.window`: a pipeline that records the context it was built with."""
    from scheduler.core import Pipeline
    from scheduler.pipelines import registry
    from scheduler.pipelines.noop import NoopSink, NoopSource

    seen = []

    def factory(ctx):
        seen.append(ctx)
        return Pipeline(NoopSource(n=1), None, NoopSink())

    registry.register_pipeline("test.window", factory, replace=True)
    yield seen
    registry._pipelines.pop("test.window", None)


def test_window_gives_the_pipeline_the_window_a_run_of_it_reads(window_seen):
    from datetime import UTC, datetime

    out = StringIO()
    call_command("run_pipeline", "test.window", "--window", "2026-03-01", "2026-03-02T00:00:00+01:00",
                 "--logical-time", "2026-03-02T06:00:00Z", stdout=out)
    ctx = window_seen[-1]
    assert (ctx.window.low, ctx.window.high) == (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 1, 23, tzinfo=UTC))
    assert ctx.logical_time == datetime(2026, 3, 2, 6, tzinfo=UTC) and ctx.run_id is None
    assert out.getvalue().startswith("window [2026-03-01T00:00:00+00:00, 2026-03-01T23:00:00+00:00)\n")
    call_command("run_pipeline", "test.window", "--window", "100", "250", stdout=out)
    assert (window_seen[-1].window.low, window_seen[-1].window.high) == (100, 250)
    assert "window (100, 250]" in out.getvalue()
    call_command("run_pipeline", "test.window", stdout=out)
    assert window_seen[-1].window is None  # no window: the whole table, as before


@pytest.mark.parametrize(("args", "message"), [
    (["--window", "2026-03-02", "2026-03-01"], "--window HIGH: must be after low"),
    (["--window", "7", "2026-03-01"], "--window HIGH: low and high must both be datetimes or both be integers"),
    (["--window", "yesterday", "today"], "--window LOW: must be an ISO datetime"),
    (["--logical-time", "soon"], "--logical-time: must be an ISO datetime"),
    (["--logical-time", "12"], "--logical-time: must be an ISO datetime"),
])
def test_a_bad_window_exits_2_naming_the_option_and_runs_nothing(window_seen, args, message):
    with pytest.raises(CommandError) as info:
        call_command("run_pipeline", "test.window", *args)
    assert info.value.returncode == 2 and str(info.value).startswith(message), str(info.value)
    assert window_seen == []


@pytest.mark.django_db
def test_run_window_loads_one_window_from_and_into_the_test_database():
    """The documented pytest helper, against the test database (SQLite or PostgreSQL, as the suite runs)."""
    from datetime import UTC, datetime

    from django.db import connection

    from scheduler.core import Pipeline
    from scheduler.pipelines import registry
    from scheduler.pipelines.sql import SqlSink, SqlSource
    from scheduler.pipelines.values import iso_utc
    from scheduler.testing import failures, run_window

    stamp = "TIMESTAMP WITH TIME ZONE" if connection.vendor == "postgresql" else "TEXT"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE rw_events (id INTEGER PRIMARY KEY, kind TEXT, updated_at {stamp})")
        for pk, at in [(1, "2026-02-28T23:59:59"), (2, "2026-03-01T00:00:00"), (3, "2026-03-01T23:59:59"),
                       (4, "2026-03-02T00:00:00")]:
            when = datetime.fromisoformat(at).replace(tzinfo=UTC)
            value = when if connection.vendor == "postgresql" else iso_utc(when)
            cursor.execute("INSERT INTO rw_events VALUES (%s, %s, %s)", [pk, f"k{pk}", value])

    def factory(ctx):
        return Pipeline(SqlSource("default", table="rw_events", watermark_column="updated_at", window=ctx.window),
                        None, SqlSink("default", table="rw_loaded", key="id", create=True),
                        watermark_column="updated_at")

    registry.register_pipeline("test.rw", factory, replace=True)
    try:
        report = run_window("test.rw", datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
    finally:
        registry._pipelines.pop("test.rw", None)
    assert report.ok, failures(report)
    assert report.rows == 2 and report.records[0].watermark is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM rw_loaded ORDER BY id")
        assert [row[0] for row in cursor.fetchall()] == [2, 3]


def test_run_window_refuses_params_its_pipeline_does_not_declare():
    from scheduler.core import ConfigError
    from scheduler.testing import run_window

    with pytest.raises(ConfigError) as info:
        run_window("demo.orders_sync", "2026-03-01", "2026-03-02", params={"path": "/etc"})
    assert "path" in str(info.value)
