"""Pipelines of the load benchmark (bench/load.py), loaded into its qcluster through ETL_PIPELINE_MODULES.

Each is the built-in SQL source and upsert sink and nothing else: the source
table `flights` read by watermark window on `time_hour`, upserted on `id`.
The databases come from the environment the benchmark gives its cluster
(BENCH_LOAD_SRC_URL, BENCH_LOAD_DST_URL, BENCH_LOAD_SQLITE), never from run params.
"""
from __future__ import annotations

import os

from scheduler.core import Pipeline
from scheduler.pipelines.registry import register_pipeline
from scheduler.pipelines.sql import SqlSink, SqlSource

COLUMN = "time_hour"


def _pipeline(ctx, sink: SqlSink) -> Pipeline:
    source = SqlSource(os.environ["BENCH_LOAD_SRC_URL"], table="flights", watermark_column=COLUMN, window=ctx.window)
    return Pipeline(source, None, sink, watermark_column=COLUMN)


def _postgres(table: str):
    def factory(ctx) -> Pipeline:
        return _pipeline(ctx, SqlSink(os.environ["BENCH_LOAD_DST_URL"], table=table, key="id"))

    return factory


def flights_sqlite(ctx) -> Pipeline:
    return _pipeline(ctx, SqlSink(f"sqlite:///{os.environ['BENCH_LOAD_SQLITE']}", table="flights", key="id"))


register_pipeline("bench.flights_live", _postgres("flights_live"), watermark_column=COLUMN, replace=True)
register_pipeline("bench.flights_backfill", _postgres("flights_backfill"), watermark_column=COLUMN, replace=True)
register_pipeline("bench.flights_sqlite", flights_sqlite, watermark_column=COLUMN, replace=True)
