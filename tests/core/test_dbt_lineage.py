"""dbt's manifest read into lineage datasets and job types, and a profile into a namespace (no Django)."""
from __future__ import annotations

import pytest

from scheduler.core import LineageDataset
from scheduler.core.dbt_lineage import job_type, node_datasets, profile_namespace

NS = "postgres://wh.internal:5432"


def _node(name, *, parents=(), materialized="table", schema="analytics", alias=None):
    return {"name": name, "database": "wh", "schema": schema, "alias": alias or name,
            "config": {"materialized": materialized}, "depends_on": {"nodes": list(parents)}}


MANIFEST = {
    "metadata": {"adapter_type": "postgres"},
    "nodes": {
        "seed.shop.customers": _node("customers", schema="raw"),
        "model.shop.stg_orders": _node("stg_orders", parents=["source.shop.shop.orders"], materialized="ephemeral"),
        "model.shop.orders": _node("orders", parents=["model.shop.stg_orders", "seed.shop.customers"],
                                   alias="fct_orders"),
        "snapshot.shop.orders_history": _node("orders_history", parents=["model.shop.orders"], schema="snapshots"),
        "test.shop.not_null_orders_id.6bd2c50f02": _node("not_null_orders_id", parents=["model.shop.orders"],
                                                          materialized="test"),
    },
    "sources": {"source.shop.shop.orders": {"name": "orders", "identifier": "orders_v2", "database": "wh",
                                            "schema": "shop"}},
    "unit_tests": {"unit_test.shop.orders.test_totals": {"depends_on": {"nodes": ["model.shop.orders"]}}},
}


def _names(datasets):
    return [d.name for d in datasets]


def test_a_model_reads_its_parents_relations_through_ephemeral_models_and_writes_its_own():
    inputs, outputs = node_datasets(MANIFEST, "model.shop.orders", NS)
    assert _names(inputs) == ["wh.shop.orders_v2", "wh.raw.customers"]  # the source by its identifier
    assert outputs == [LineageDataset(NS, "wh.analytics.fct_orders")]  # the relation dbt builds: its alias


def test_seeds_snapshots_tests_and_unit_tests():
    assert node_datasets(MANIFEST, "seed.shop.customers", NS) == ([], [LineageDataset(NS, "wh.raw.customers")])
    assert node_datasets(MANIFEST, "snapshot.shop.orders_history", NS) == (
        [LineageDataset(NS, "wh.analytics.fct_orders")], [LineageDataset(NS, "wh.snapshots.orders_history")])
    # a data test reads what it tests and writes nothing; a unit test reads fixtures only
    assert node_datasets(MANIFEST, "test.shop.not_null_orders_id.6bd2c50f02", NS) == (
        [LineageDataset(NS, "wh.analytics.fct_orders")], [])
    assert node_datasets(MANIFEST, "unit_test.shop.orders.test_totals", NS) == ([], [])
    assert node_datasets(None, "model.shop.orders", NS) == ([], [])
    assert node_datasets(MANIFEST, "model.shop.unknown", NS) == ([], [])


@pytest.mark.parametrize(("uid", "kind"), [("model.a.b", "MODEL"), ("seed.a.b", "SEED"), ("snapshot.a.b", "SNAPSHOT"),
                                           ("test.a.b.c", "TEST"), ("unit_test.a.b.c", "TEST")])
def test_job_types_are_openlineage_dbts(uid, kind):
    assert job_type(uid) == kind


@pytest.mark.parametrize(("output", "namespace"), [
    ({"type": "postgres", "host": "wh.internal", "port": 5433, "user": "etl", "password": "s3cret"},
     "postgres://wh.internal:5433"),
    ({"type": "postgres", "host": "wh.internal"}, "postgres://wh.internal:5432"),
    ({"type": "redshift", "host": "rs.example.com"}, "redshift://rs.example.com:5439"),
    ({"type": "snowflake", "account": "XY12345.eu-west-1"}, "snowflake://xy12345.eu-west-1"),
    ({"type": "bigquery", "project": "p"}, "bigquery"),
    ({"type": "databricks", "host": "dbc.cloud.databricks.com"}, "databricks://dbc.cloud.databricks.com"),
    ({"type": "sqlserver", "server": "sql.internal"}, "mssql://sql.internal:1433"),
    ({"type": "duckdb", "path": "/srv/wh.duckdb"}, "duckdb:///srv/wh.duckdb"),
    ({"type": "duckdb"}, "duckdb://:memory:"),
    ({"type": "postgres", "host": "{{ env_var('PGHOST') }}"}, None),  # a template nobody filled
    ({"type": "postgres"}, None),
])
def test_a_profile_names_its_warehouse_never_its_user_or_password(output, namespace):
    assert profile_namespace(output) == namespace
