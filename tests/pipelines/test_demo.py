import csv
import json
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core import ConfigError, EtlError, Executor, MemoryLedger, Window
from scheduler.pipelines import RunContext, demo, get_pipeline, get_workflow
from scheduler.pipelines.demo_data import append_new_rows, generate_source_db
from scheduler.pipelines.values import iso_utc

NOW = datetime(2024, 5, 1, 12, tzinfo=UTC)


@pytest.fixture(autouse=True)
def demo_registered():
    demo.register()


PATH_KEYS = {"source_db", "warehouse_db", "report_dir"}


@pytest.fixture
def paths(tmp_path, settings):
    """The demo's files, set where they come from: the settings, inside ETL_FILES_DIR."""
    source = generate_source_db(tmp_path / "source.db", now=NOW, customers=300, orders=2000)
    settings.ETL_FILES_DIR = str(tmp_path)
    settings.ETL_DEMO_SOURCE_DB = str(source)
    settings.ETL_DEMO_WAREHOUSE_DB = str(tmp_path / "warehouse.db")
    settings.ETL_DEMO_REPORT_DIR = str(tmp_path / "reports")
    return {
        "source_db": str(source),
        "warehouse_db": str(tmp_path / "warehouse.db"),
        "report_dir": str(tmp_path / "reports"),
    }


def ctx(params, *, window=None, logical_time=NOW, run_id=1, watermark_column=None):
    # the paths are in the settings (the paths fixture); the params a run gets are data only
    data = {k: v for k, v in params.items() if k not in PATH_KEYS}
    return RunContext(run_id, "demo", window, data, logical_time, watermark_column=watermark_column)


def query(paths, sql, *args):
    conn = sqlite3.connect(paths["warehouse_db"])
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def test_nightly_workflow_syncs_builds_revenue_and_publishes_the_report(paths):
    executor = Executor(MemoryLedger(), sleep=lambda s: None)
    workflow = get_workflow("demo.nightly")
    for node, pipeline in workflow.build(ctx(paths)).items():
        executor.add_pipeline(node, pipeline)
    for upstream, downstream in workflow.deps:
        executor.add_dep(downstream, upstream)
    report = executor.run()
    assert report.ok, report.to_dict()
    rows = {r.task_id: r.rows for r in report.records}
    assert rows["extract_customers"] == 300 and rows["extract_orders"] == 2000
    total = query(paths, "SELECT ROUND(SUM(amount), 2), SUM(orders) FROM revenue_by_country")[0]
    expected = query(paths, "SELECT ROUND(SUM(amount), 2), COUNT(*) FROM fact_orders WHERE status != 'cancelled'")[0]
    assert total[1] == expected[1]
    # Each group is rounded to cents, so the totals may differ by half a cent per group.
    assert total[0] == pytest.approx(expected[0], abs=0.005 * rows["build_revenue"] + 0.01)
    with open(f"{paths['report_dir']}/revenue_2024-04-30.csv", newline="") as handle:
        report_rows = list(csv.DictReader(handle))
    assert report_rows and {r["day"] for r in report_rows} == {"2024-04-30"}
    assert len(report_rows) == rows["publish_report"]


def test_orders_sync_loads_only_the_window_and_a_rerun_does_not_duplicate(paths):
    spec = get_pipeline("demo.orders_sync")
    assert spec.build(ctx(paths)).run().rows == 2000
    later = NOW + timedelta(hours=1)
    changed = append_new_rows(paths["source_db"], now=later, n=30, seed=3)
    window = Window(NOW, later)
    result = spec.build(ctx(paths, window=window, logical_time=later)).run()
    assert result.rows == changed["inserted"] + changed["updated_orders"]
    assert NOW < datetime.fromisoformat(result.max_value) <= later
    assert spec.build(ctx(paths, window=window, logical_time=later)).run().rows == result.rows
    assert query(paths, "SELECT COUNT(*) FROM fact_orders") == [(2030,)]
    assert query(paths, "SELECT COUNT(*) FROM fact_orders WHERE last_modified > ?", iso_utc(NOW)) == [(result.rows,)]


def test_customers_sync_filters_on_the_schedules_watermark_column(paths):
    window = Window(NOW - timedelta(days=1), NOW)
    pipeline = get_pipeline("demo.customers_sync").build(ctx(paths, window=window))
    loaded = pipeline.run().rows
    source = sqlite3.connect(paths["source_db"])
    expected = source.execute(
        "SELECT COUNT(*) FROM customers WHERE last_modified >= ? AND last_modified < ?",
        (iso_utc(window.low), iso_utc(window.high)),
    ).fetchone()[0]
    assert 0 < loaded == expected < 300


def test_order_confirmed_upserts_the_event_payload(paths):
    spec = get_pipeline("demo.order_confirmed")
    assert spec.build(ctx(dict(paths, order_id=7, status="confirmed"), run_id=11)).run().rows == 1
    assert spec.build(ctx(dict(paths, order_id="7", status="shipped"), run_id=12)).run().rows == 1
    assert query(paths, "SELECT order_id, status, confirmed_at, run_id FROM confirmed_orders") == [
        (7, "shipped", iso_utc(NOW), 12)
    ]


@pytest.mark.parametrize(
    "payload, field", [({}, "order_id"), ({"order_id": "x"}, "order_id"), ({"order_id": 1, "status": 3}, "status")]
)
def test_order_confirmed_refuses_a_bad_payload(paths, payload, field):
    with pytest.raises(ConfigError) as err:
        get_pipeline("demo.order_confirmed").build(ctx(dict(paths, **payload)))
    assert err.value.field == field


def test_webhook_ingest_keeps_each_record_as_json_keyed_by_id(paths):
    spec = get_pipeline("demo.webhook_ingest")
    records = [{"id": 1, "kind": "a", "tags": ["x"]}, {"id": "b-2", "nested": {"k": 1}}]
    assert spec.build(ctx(dict(paths, records=records), run_id=5)).run().rows == 2
    assert spec.build(ctx(dict(paths, records=[{"id": 1, "kind": "z"}]), run_id=6)).run().rows == 1
    stored = dict(query(paths, "SELECT id, payload FROM webhook_records"))
    assert json.loads(stored["1"]) == {"id": 1, "kind": "z"}
    assert json.loads(stored["b-2"]) == {"id": "b-2", "nested": {"k": 1}}


@pytest.mark.parametrize("records", [None, "x", [1], [{"no_id": 1}]])
def test_webhook_ingest_refuses_a_body_without_records(paths, records):
    with pytest.raises(ConfigError) as err:
        get_pipeline("demo.webhook_ingest").build(ctx(dict(paths, records=records)))
    assert err.value.field == "records"


def test_flaky_fails_when_asked_and_succeeds_otherwise():
    spec = get_pipeline("demo.flaky")
    with pytest.raises(EtlError, match="on purpose"):
        spec.build(ctx({"fail": True})).run(sleep=lambda s: None)
    with pytest.raises(EtlError, match="on purpose"):
        spec.build(ctx({"fail": "true"})).run(sleep=lambda s: None)
    assert spec.build(ctx({})).run().rows == 10
    recovering = spec.build(ctx({"fail": 2}))
    assert recovering.run(sleep=lambda s: None).rows == 10
    assert recovering.source.attempts == 3
    with pytest.raises(ConfigError) as err:
        spec.build(ctx({"fail": "sometimes"}))
    assert err.value.field == "fail"


def test_noop_passes_the_requested_number_of_rows():
    assert get_pipeline("demo.noop").build(ctx({"rows": 5})).run().rows == 5
    assert get_pipeline("demo.noop").build(ctx({})).run().rows == 0


def test_daily_report_refuses_a_malformed_day(paths):
    with pytest.raises(ConfigError) as err:
        get_pipeline("demo.daily_report").build(ctx(dict(paths, day="yesterday")))
    assert err.value.field == "day"
