"""Windows on the calendar: a backfill or a live watermark over a month loads exactly that month.

336 hourly rows would do; we use every hour from 2013-02-27 to 2013-04-03 with two rows an
hour, so the edges (2013-03-01 00:00 and 2013-04-01 00:00) each hold rows.
"""
from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from scheduler.core import Pipeline
from scheduler.models import BackfillStatus, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.sql import SqlSink, SqlSource
from scheduler.pipelines.values import iso_utc
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.runs.watermarks import watermark_state
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
UTC = timezone.utc
START = datetime(2013, 2, 27, tzinfo=UTC)
HOURS = 24 * 35


@pytest.fixture
def hourly(tmp_path):
    """(source url, warehouse path, what each run saw): two rows stamped on every hour."""
    source = tmp_path / "source.sqlite3"
    conn = sqlite3.connect(source)
    conn.execute("CREATE TABLE readings (id INTEGER PRIMARY KEY, ts TEXT NOT NULL)")
    conn.executemany("INSERT INTO readings VALUES (?, ?)",
                     [(2 * h + k, iso_utc(START + timedelta(hours=h))) for h in range(HOURS) for k in (0, 1)])
    conn.commit()
    conn.close()
    warehouse = tmp_path / "warehouse.sqlite3"
    seen: list[tuple] = []

    def factory(ctx):
        seen.append((ctx.backfill, ctx.params.get("table"), ctx.window))
        return Pipeline(
            SqlSource(f"sqlite:///{source}", table="readings", watermark_column="ts", window=ctx.window),
            None,
            SqlSink(f"sqlite:///{warehouse}", table=ctx.params.get("table", "live_readings"), key="id", create=True),
            watermark_column="ts",
        )

    registry.register_pipeline("test.hourly", factory, replace=True)
    yield warehouse, seen
    registry._pipelines.pop("test.hourly", None)


def _loaded(warehouse, table):
    conn = sqlite3.connect(warehouse)
    try:
        return conn.execute(f"SELECT COUNT(*), MIN(ts), MAX(ts) FROM {table}").fetchone()
    finally:
        conn.close()


def _drain(now, rounds=100):
    for _ in range(rounds):
        if not tick_and_execute(now):
            return
    raise AssertionError("runs still pending")


MARCH = (31 * 24 * 2, "2013-03-01T00:00:00.000000+00:00", "2013-03-31T23:00:00.000000+00:00")


def test_a_backfill_of_march_loads_exactly_march_into_the_table_its_params_name(make_schedule, hourly, now):
    warehouse, seen = hourly
    schedule = make_schedule("readings", target_id="test.hourly", watermark_config={
        "type": "datetime", "column": "ts", "initial": "2013-02-27T00:00:00+00:00"})
    backfill = backfill_submit(schedule=schedule, start="2013-03-01T00:00:00+00:00", end="2013-04-01T00:00:00+00:00",
                               window=86400, reason="replay March", requested_by="tests", max_parallel=4,
                               params={"table": "march_replay"}, now=now)
    assert backfill.total_windows == 31 and backfill.params == {"table": "march_replay"}
    _drain(now)
    backfill.refresh_from_db()
    assert backfill.status == BackfillStatus.COMPLETED
    assert _loaded(warehouse, "march_replay") == MARCH
    assert {(b, table) for b, table, _ in seen} == {(backfill.pk, "march_replay")}  # ctx.backfill is set
    assert watermark_state(schedule).value is None  # a backfill never moves the live mark
    assert Run.objects.filter(backfill=backfill, status=RunStatus.SUCCEEDED).count() == 31


def test_a_live_watermark_with_an_until_bound_loads_exactly_march_and_then_skips(make_schedule, hourly, now):
    warehouse, seen = hourly
    schedule = make_schedule("readings", target_id="test.hourly", watermark_config={
        "type": "datetime", "column": "ts", "initial": "2013-03-01T00:00:00+00:00",
        "until": "2013-04-01T00:00:00+00:00", "max_window": 7 * 86400})
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    _drain(now)  # the capped windows queue each other: 7 + 7 + 7 + 7 + 3 days
    assert _loaded(warehouse, "live_readings") == MARCH
    assert [w.high.day for _, _, w in seen] == [8, 15, 22, 29, 1]
    assert {b for b, _, _ in seen} == {None}  # live runs: ctx.backfill is None
    assert watermark_state(schedule).value == datetime(2013, 4, 1, tzinfo=UTC)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now + timedelta(hours=1))
    _drain(now + timedelta(hours=1))
    run.refresh_from_db()
    assert run.status == RunStatus.SKIPPED
    assert run.reason == "the watermark reached its until bound (2013-04-01T00:00:00+00:00)"
    assert _loaded(warehouse, "live_readings") == MARCH


def test_backfill_params_are_checked_like_run_params(make_schedule, hourly, now):
    from scheduler.services.common.errors import ServiceError

    schedule = make_schedule("readings", target_id="test.hourly", watermark_config={
        "type": "datetime", "column": "ts", "initial": "2013-02-27T00:00:00+00:00"})
    with pytest.raises(ServiceError) as info:
        backfill_submit(schedule=schedule, start="2013-03-01T00:00:00+00:00", end="2013-04-01T00:00:00+00:00",
                        window=86400, reason="x", requested_by="tests", params=["table"], now=now)
    assert info.value.field == "params"
    assert not schedule.backfills.exists()
