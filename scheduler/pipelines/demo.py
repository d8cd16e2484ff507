"""Demo pipelines over the SQLite demo data (see demo_data.py).

File locations come only from the Django settings `ETL_DEMO_SOURCE_DB`,
`ETL_DEMO_WAREHOUSE_DB` and `ETL_DEMO_REPORT_DIR`, never from run params, and
each must resolve (symbolic links followed) inside `ETL_FILES_DIR`: a run
cannot be pointed at another file, the scheduler's own database included.
The settings are read inside the factories: importing this module touches no
database and no settings. A missing source database is generated on first
use. Each pipeline declares the run params it takes (a `Params` model);
anything else is refused where the params come in.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from scheduler.core import ConfigError, EtlError, IdentityTransform, Pipeline, RetryPolicy

from .context import RunContext
from .demo_data import create_warehouse_db, generate_source_db
from .files import CsvSink
from .noop import FailingSource, NoopSink, NoopSource
from .params import Params
from .places import FILES_SETTING, allowed_path, sqlite_files
from .registry import register_pipeline, register_workflow
from .sql import SqlSink, SqlSource
from .transforms import MapTransform
from .values import iso_utc

REPORT_COLUMNS = ["day", "country", "currency", "amount", "orders"]
REVENUE_QUERY = """
SELECT c.country AS country, o.currency AS currency, substr(o.created_at, 1, 10) AS day,
       ROUND(SUM(o.amount), 2) AS amount, COUNT(*) AS orders
FROM fact_orders AS o JOIN dim_customers AS c ON c.id = o.customer_id
WHERE o.status != 'cancelled'
GROUP BY c.country, o.currency, substr(o.created_at, 1, 10)
"""
REPORT_QUERY = (
    "SELECT day, country, currency, amount, orders FROM revenue_by_country "
    "WHERE day = ? ORDER BY amount DESC, country, currency"
)
# Failures are the point of demo.flaky: retry quickly, don't make people wait.
FLAKY_POLICY_DELAY = 0.1
FLAKY_MAX_FAILURES = 5


def _location(setting: str) -> Path:
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        value = getattr(settings, setting, None)
    except ImproperlyConfigured:
        value = None
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ConfigError(setting, "is not set; the demo pipelines read their files from the settings")
    return allowed_path(value, field=setting, base=getattr(settings, FILES_SETTING, None),
                        forbidden=sqlite_files(getattr(settings, "DATABASES", None)))


def _sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"  # path is absolute, so this reads sqlite:////...


def source_url(ctx: RunContext) -> str:
    path = _location("ETL_DEMO_SOURCE_DB")
    generate_source_db(path)  # returns at once when the file exists
    return _sqlite_url(path)


def warehouse_url(ctx: RunContext) -> str:
    return _sqlite_url(create_warehouse_db(_location("ETL_DEMO_WAREHOUSE_DB")))


def _now(ctx: RunContext) -> datetime:
    return ctx.logical_time or datetime.now(UTC)


def _sync(ctx: RunContext, source_table: str, target_table: str) -> Pipeline:
    column = ctx.watermark_column or "last_modified"
    return Pipeline(
        SqlSource(source_url(ctx), table=source_table, watermark_column=column, window=ctx.window),
        IdentityTransform(),
        SqlSink(warehouse_url(ctx), table=target_table, key="id", create=True),
        watermark_column=column,
    )


def customers_sync(ctx: RunContext) -> Pipeline:
    """Customers changed inside the run's window -> warehouse dim_customers."""
    return _sync(ctx, "customers", "dim_customers")


def orders_sync(ctx: RunContext) -> Pipeline:
    """Orders changed inside the run's window -> warehouse fact_orders."""
    return _sync(ctx, "orders", "fact_orders")


def revenue_transform(ctx: RunContext) -> Pipeline:
    """Revenue per country, currency and day, rebuilt from the warehouse."""
    # A full rebuild: an order modified today can belong to any earlier day,
    # and the upsert makes a rerun harmless.
    warehouse = warehouse_url(ctx)
    return Pipeline(
        SqlSource(warehouse, query=REVENUE_QUERY, reads=["fact_orders", "dim_customers"]),
        IdentityTransform(),
        SqlSink(warehouse, table="revenue_by_country", key=["country", "currency", "day"], create=True),
    )


def _report_day(ctx: RunContext) -> date:
    value = ctx.params.get("day")
    if value is None:
        return (_now(ctx) - timedelta(days=1)).date()
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError("day", f"must be a date like 2024-05-01, got {value!r}") from None


def daily_report(ctx: RunContext) -> Pipeline:
    """Yesterday's revenue by country as a CSV file in ETL_DEMO_REPORT_DIR."""
    day = _report_day(ctx)
    report_dir = _location("ETL_DEMO_REPORT_DIR")
    return Pipeline(
        SqlSource(warehouse_url(ctx), query=REPORT_QUERY, params=[day.isoformat()], reads=["revenue_by_country"]),
        IdentityTransform(),
        CsvSink(report_dir / f"revenue_{day.isoformat()}.csv", columns=REPORT_COLUMNS, append=False),
    )


def order_confirmed(ctx: RunContext) -> Pipeline:
    """Event-driven: the event payload's order (order_id, status) -> confirmed_orders."""
    order_id = ctx.params.get("order_id")
    if isinstance(order_id, str) and order_id.strip().isdigit():
        order_id = int(order_id)
    if isinstance(order_id, bool) or not isinstance(order_id, int):
        raise ConfigError("order_id", f"the event payload needs an integer order_id, got {order_id!r}")
    status = ctx.params.get("status", "confirmed")
    if not isinstance(status, str) or not status:
        raise ConfigError("status", f"must be a non-empty string, got {status!r}")
    row = {"order_id": order_id, "status": status, "confirmed_at": iso_utc(_now(ctx)), "run_id": ctx.run_id}
    return Pipeline(
        NoopSource([row]),
        IdentityTransform(),
        SqlSink(warehouse_url(ctx), table="confirmed_orders", key="order_id", create=True),
    )


def webhook_ingest(ctx: RunContext) -> Pipeline:
    """A webhook body's `records` (objects with an id) -> webhook_records."""
    records = ctx.params.get("records")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise ConfigError("records", "the webhook body needs 'records': a list of objects")
    for i, record in enumerate(records):
        if record.get("id") in (None, ""):
            raise ConfigError("records", f"record {i} has no 'id'")
    received_at = iso_utc(_now(ctx))

    def to_row(record: dict) -> dict:
        # The whole object is kept as JSON: webhook bodies change shape, the
        # table does not have to.
        payload = json.dumps(record, sort_keys=True, default=str)
        return {"id": str(record["id"]), "payload": payload, "received_at": received_at, "run_id": ctx.run_id}

    return Pipeline(
        NoopSource(records),
        MapTransform(to_row),
        SqlSink(warehouse_url(ctx), table="webhook_records", key="id", create=True),
    )


def _fail_setting(value: Any) -> bool | int:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and 0 <= value <= FLAKY_MAX_FAILURES:
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "false", "0", "no", ""):
        return value.strip().lower() in ("true", "1", "yes")
    raise ConfigError("fail", f"must be true/false or a number of failures up to {FLAKY_MAX_FAILURES}, got {value!r}")


def flaky(ctx: RunContext) -> Pipeline:
    """Fails on demand: params fail=true fails the run, fail=N fails N extracts then recovers."""
    fail = _fail_setting(ctx.params.get("fail", False))
    if fail is True:
        policy = RetryPolicy(max_attempts=2, initial_delay=FLAKY_POLICY_DELAY)
        source = FailingSource(
            times=policy.max_attempts, exc=EtlError("demo.flaky failed on purpose (params: fail=true)")
        )
    else:
        policy = RetryPolicy(max_attempts=int(fail) + 1, initial_delay=FLAKY_POLICY_DELAY)
        source = FailingSource(times=int(fail), then=NoopSource(n=10))
    return Pipeline(source, IdentityTransform(), NoopSink(), policy=policy)


def noop(ctx: RunContext) -> Pipeline:
    """Does nothing (params rows=N passes N generated rows through)."""
    rows = ctx.params.get("rows", 0)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise ConfigError("rows", f"must be a non-negative integer, got {rows!r}")
    return Pipeline(NoopSource(n=rows), IdentityTransform(), NoopSink())


class NoParams(Params):
    """Takes no run params."""


class ReportParams(Params):
    day: date | None = None


class OrderParams(Params):
    order_id: int | str
    status: str = "confirmed"


class WebhookParams(Params):
    records: list[dict[str, Any]]


class FlakyParams(Params):
    fail: bool | int | str = False


class NoopParams(Params):
    """demo.noop reads no file and connects nowhere: it is the stand-in target of examples and tests, so any
    other key passes through as inert data; `rows` is checked."""

    model_config = ConfigDict(extra="allow", frozen=True)
    rows: int = 0


PIPELINES = {
    "demo.customers_sync": (customers_sync, "last_modified", NoParams),
    "demo.orders_sync": (orders_sync, "last_modified", NoParams),
    "demo.revenue_transform": (revenue_transform, None, NoParams),
    "demo.daily_report": (daily_report, None, ReportParams),
    "demo.order_confirmed": (order_confirmed, None, OrderParams),
    "demo.webhook_ingest": (webhook_ingest, None, WebhookParams),
    "demo.flaky": (flaky, None, FlakyParams),
    "demo.noop": (noop, None, NoopParams),
}


def register() -> None:
    """Register the demo pipelines and the demo.nightly workflow (again, if needed)."""
    for pipeline_id, (factory, column, schema) in PIPELINES.items():
        register_pipeline(pipeline_id, factory, watermark_column=column, params=schema, replace=True)
    register_workflow(
        "demo.nightly",
        {
            "extract_customers": customers_sync,
            "extract_orders": orders_sync,
            "build_revenue": revenue_transform,
            "publish_report": daily_report,
        },
        [
            ("extract_customers", "build_revenue"),
            ("extract_orders", "build_revenue"),
            ("build_revenue", "publish_report"),
        ],
        "Sync customers and orders, rebuild revenue, publish the daily report.",
        params=ReportParams,
        replace=True,
    )


register()
