"""Datasets of the built-in pipelines, workflow nodes as jobs with a parent facet, the backfill window facet."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.core import ConfigError, IdentityTransform, LineageDataset, Pipeline, sql_url_dataset
from scheduler.models import LineageEvent, Run, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.demo_data import generate_source_db
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.pipelines.sql import SqlSink, SqlSource, lineage_dataset
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.integrations.lineage import node_uuid, run_uuid
from scheduler.services.integrations.lineage_send import lineage_drain
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


@pytest.fixture
def demo_params(tmp_path, settings):
    """The demo's files in the settings (paths are never params); the run params are data only: none."""
    generate_source_db(tmp_path / "source.db", customers=50, orders=200)  # small: the demo's default is 100,000
    settings.ETL_FILES_DIR = str(tmp_path)
    settings.ETL_DEMO_SOURCE_DB = str(tmp_path / "source.db")
    settings.ETL_DEMO_WAREHOUSE_DB = str(tmp_path / "warehouse.db")
    settings.ETL_DEMO_REPORT_DIR = str(tmp_path / "reports")
    return {}


def _names(datasets):
    return [(d["namespace"], d["name"]) for d in datasets]


def test_a_sql_sync_reports_its_source_table_and_sink_table(lineage_on, make_schedule, now, demo_params, tmp_path,
                                                            transport):
    schedule = make_schedule("customers", target_id="demo.customers_sync")
    run_trigger_manual(schedule=schedule, actor="tests", params=demo_params, now=now)
    tick_and_execute(now)
    assert Run.objects.get().status == S.SUCCEEDED
    lineage_drain(client=transport.client, now=now)
    complete = transport.events()[-1]
    assert complete["eventType"] == "COMPLETE"
    assert _names(complete["inputs"]) == [(f"sqlite://{tmp_path / 'source.db'}", "customers")]
    assert _names(complete["outputs"]) == [(f"sqlite://{tmp_path / 'warehouse.db'}", "dim_customers")]


def test_a_workflow_run_and_its_nodes_with_parent_facets_and_datasets(lineage_on, make_schedule, now, demo_params,
                                                                      tmp_path, transport):
    schedule = make_schedule("nightly", target_kind="workflow", target_id="demo.nightly")
    run = run_trigger_manual(schedule=schedule, actor="tests", params={**demo_params, "day": "2026-03-01"}, now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED
    lineage_drain(client=transport.client, now=now)
    events = transport.events()
    parent = run_uuid(run)
    workflow = [(e["eventType"], e["job"]["name"]) for e in events if e["run"]["runId"] == parent]
    assert workflow == [("START", "nightly"), ("COMPLETE", "nightly")]
    nodes = [e for e in events if e["run"]["runId"] != parent]
    assert sorted({e["job"]["name"] for e in nodes}) == [
        "nightly.build_revenue", "nightly.extract_customers", "nightly.extract_orders", "nightly.publish_report"]
    for node in nodes:
        facet = node["run"]["facets"]["parent"]
        assert facet["run"]["runId"] == parent
        assert (facet["job"]["namespace"], facet["job"]["name"]) == ("etl-scheduler", "nightly")
        assert facet["root"]["run"]["runId"] == parent
        task = node["job"]["name"].split(".", 1)[1]
        assert node["run"]["runId"] == node_uuid(parent, task, 1)
    per_node = {}
    for node in nodes:
        per_node.setdefault(node["job"]["name"], []).append(node["eventType"])
    assert all(types == ["START", "COMPLETE"] for types in per_node.values()), per_node
    ends = {e["job"]["name"]: e for e in nodes if e["eventType"] == "COMPLETE"}
    warehouse = f"sqlite://{tmp_path / 'warehouse.db'}"
    assert _names(ends["nightly.build_revenue"]["inputs"]) == [(warehouse, "fact_orders"), (warehouse, "dim_customers")]
    assert _names(ends["nightly.build_revenue"]["outputs"]) == [(warehouse, "revenue_by_country")]
    assert _names(ends["nightly.publish_report"]["outputs"]) == [
        ("file", str(tmp_path / "reports" / "revenue_2026-03-01.csv"))]


def test_a_backfill_window_run_carries_its_window_and_backfill_id(lineage_on, make_schedule, now, transport):
    schedule = make_schedule("marked", target_id="demo.noop", watermark_config={
        "type": "datetime", "column": "ts", "initial": now.isoformat()})
    backfill = backfill_submit(schedule=schedule, start="2026-01-01T00:00:00+00:00", end="2026-01-01T01:00:00+00:00",
                               window=3600, reason="replay", requested_by="user:olivia", now=now)
    tick_and_execute(now)
    lineage_drain(client=transport.client, now=now)
    start, complete = transport.events()
    for event in (start, complete):
        window = event["run"]["facets"]["etlScheduler_window"]
        assert (window["backfillId"], window["low"][:19], window["high"][:19]) == (
            backfill.pk, "2026-01-01T00:00:00", "2026-01-01T01:00:00")
        assert window["_schemaURL"].endswith("#/$defs/WindowRunFacet") and window["_producer"]


def test_a_custom_pipeline_declares_its_datasets_on_the_pipeline_and_the_context(lineage_on, make_schedule, now):
    def custom(ctx):
        ctx.declare_output("s3://bucket", "exports/daily")
        return Pipeline(NoopSource([{"id": 1}]), IdentityTransform(), NoopSink(),
                        inputs=[LineageDataset("https://api.example.com", "/v1/orders")])

    registry.register_pipeline("test.custom", custom, replace=True)
    try:
        schedule = make_schedule("custom", target_id="test.custom")
        run_trigger_manual(schedule=schedule, actor="tests", now=now)
        tick_and_execute(now)
    finally:
        registry._pipelines.pop("test.custom", None)
    complete = LineageEvent.objects.get(event_type="COMPLETE").payload
    assert _names(complete["inputs"]) == [("https://api.example.com", "/v1/orders")]
    assert _names(complete["outputs"]) == [("s3://bucket", "exports/daily")]


def test_dataset_names_follow_the_naming_spec_and_never_carry_a_password():
    pg = sql_url_dataset("postgres://etl:s3cret@db.internal:6543/warehouse", "sales.orders")
    assert (pg.namespace, pg.name) == ("postgres://db.internal:6543", "warehouse.sales.orders")
    bare = sql_url_dataset("postgresql://etl:s3cret@db.internal/warehouse", "orders")
    assert (bare.namespace, bare.name) == ("postgres://db.internal:5432", "warehouse.public.orders")
    assert "s3cret" not in repr(pg) + repr(bare)
    lite = sql_url_dataset("sqlite:////srv/data/source.db", "customers")
    assert (lite.namespace, lite.name) == ("sqlite:///srv/data/source.db", "customers")
    src = SqlSource("postgres://etl:s3cret@db.internal:6543/warehouse", query="SELECT 1", reads=["a", "s.b"])
    assert [(d.namespace, d.name) for d in src.lineage_inputs()] == [
        ("postgres://db.internal:6543", "warehouse.public.a"), ("postgres://db.internal:6543", "warehouse.s.b")]
    sink = SqlSink("default", table="out", key="id")
    assert sink.lineage_outputs() == [lineage_dataset("default", "out")]
    with pytest.raises(ConfigError, match="name"):
        LineageDataset("file", "")
    with pytest.raises(ConfigError, match="reads"):
        SqlSource("default", table="t", reads=["u"])
    with pytest.raises(ConfigError, match="outputs"):
        Pipeline(NoopSource(), None, NoopSink(), outputs=["not a dataset"])


def test_a_live_windowed_run_carries_its_window_on_its_end_event(lineage_on, make_schedule, now):
    schedule = make_schedule("live", target_id="demo.noop", watermark_config={
        "type": "datetime", "column": "ts", "initial": (now - timedelta(hours=2)).isoformat()})
    run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    complete = LineageEvent.objects.get(event_type="COMPLETE").payload["run"]["facets"]
    assert "backfillId" not in complete["etlScheduler_window"], "a live run belongs to no backfill"
    assert complete["etlScheduler_window"]["low"][:19] == (now - timedelta(hours=2)).isoformat()[:19]
    assert complete["nominalTime"]["nominalStartTime"].startswith("2026-03-02T12:00")


def test_the_built_in_file_source_and_sink_report_their_absolute_paths(lineage_on, make_schedule, now, tmp_path,
                                                                     transport):
    from scheduler.pipelines.files import CsvSink, FileSource

    (tmp_path / "in.csv").write_text("id,name\n1,a\n2,b\n")

    def copy(ctx):
        return Pipeline(FileSource(tmp_path / "in.csv"), IdentityTransform(), CsvSink(tmp_path / "out.csv"))

    registry.register_pipeline("test.copy_file", copy, replace=True)
    try:
        schedule = make_schedule("copy", target_id="test.copy_file")
        run_trigger_manual(schedule=schedule, actor="tests", now=now)
        tick_and_execute(now)
    finally:
        registry._pipelines.pop("test.copy_file", None)
    assert Run.objects.get().status == S.SUCCEEDED
    lineage_drain(client=transport.client, now=now)
    complete = transport.events()[-1]
    assert complete["eventType"] == "COMPLETE"
    assert _names(complete["inputs"]) == [("file", str(tmp_path / "in.csv"))]
    assert _names(complete["outputs"]) == [("file", str(tmp_path / "out.csv"))]


def test_a_django_alias_is_named_for_the_database_it_is(settings):
    """On PostgreSQL `postgres://{host}:{port}` and `{database}.{schema}.{table}`; on SQLite the file's path."""
    import os

    conf = settings.DATABASES["default"]
    dataset = SqlSink("default", table="sales.orders", key="id").lineage_outputs()[0]
    if "postgresql" in conf["ENGINE"]:
        assert dataset.namespace == f"postgres://{conf['HOST'] or 'localhost'}:{conf['PORT'] or 5432}"
        assert dataset.name == f"{conf['NAME']}.sales.orders"
        bare = SqlSource("default", table="orders").lineage_inputs()[0]
        assert bare.name == f"{conf['NAME']}.public.orders"
    else:
        assert (dataset.namespace, dataset.name) == (f"sqlite://{os.path.abspath(conf['NAME'])}", "sales.orders")
    assert "PASSWORD" not in dataset.namespace and (conf.get("PASSWORD") or "\0") not in dataset.namespace
