"""Test one window of a pipeline, as a scheduled run reads it: `run_window` in pytest, `run_pipeline --window`.

    from datetime import datetime, UTC
    from scheduler.testing import failures, run_window

    def test_one_day(source_db):                       # a database your test filled
        report = run_window("sales.events", datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 3, 2, tzinfo=UTC))
        assert report.ok, failures(report)
        assert report.rows == 3

The pipeline is built by its registered factory with the `RunContext` a run of that window gets (the window, the
params checked against its declared schema, the logical time, the watermark column) and run once in this
process: its retries under its own policy, no schedule, no ledger, no cluster. What it reads and writes is what
its factory names, so point the factory at a test database (an environment variable, a Django database alias
under pytest-django). A pipeline that is not registered yet is looked up in the installed packages' entry points
(`etl_scheduler.pipelines`), so a team's package is found without Django settings.
"""
from __future__ import annotations

from datetime import date, datetime
from typing import Any

from scheduler.core import ConfigError, Executor, MemoryLedger, RunReport, Window
from scheduler.core.windows import INT64_MAX, INT64_MIN
from scheduler.pipelines.context import RunContext
from scheduler.pipelines.entrypoints import load_entry_points
from scheduler.pipelines.params import check_params
from scheduler.pipelines.registry import PIPELINE, WORKFLOW, get_pipeline, get_workflow, is_registered
from scheduler.pipelines.values import to_utc


def parse_mark(value: Any, *, field: str) -> datetime | int:
    """A window bound: an aware datetime (naive is UTC; a date is its midnight UTC) or a 64-bit integer, given
    as the value or as its text ('2026-03-01T00:00:00+01:00', '2026-03-01', '41000')."""
    if isinstance(value, bool):
        raise ConfigError(field, f"must be an ISO datetime or an integer, got {value!r}")
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, date):
        return to_utc(datetime(value.year, value.month, value.day))
    if isinstance(value, int):
        mark = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        mark = int(value.strip())
    elif isinstance(value, str):
        try:
            return to_utc(datetime.fromisoformat(value.strip()))
        except ValueError:
            raise ConfigError(field, f"must be an ISO datetime (2026-03-01T00:00:00+00:00) or an integer, "
                                     f"got {value!r}") from None
    else:
        raise ConfigError(field, f"must be an ISO datetime or an integer, got {value!r}")
    if not INT64_MIN <= mark <= INT64_MAX:
        raise ConfigError(field, "is outside the 64-bit integer range")
    return mark


def window_of(low: Any, high: Any) -> Window:
    """The window [low, high) of two datetimes, or (low, high] of two integers, checked."""
    lo, hi = parse_mark(low, field="low"), parse_mark(high, field="high")
    if isinstance(lo, datetime) != isinstance(hi, datetime):
        raise ConfigError("high", "low and high must both be datetimes or both be integers")
    if not lo < hi:
        raise ConfigError("high", f"must be after low ({lo} .. {hi} is empty)")
    return Window(lo, hi)


def target_spec(target_id: str):
    """(kind, spec) of a registered pipeline or workflow; the installed packages are loaded once if need be."""
    for attempt in range(2):
        if is_registered(WORKFLOW, target_id):
            return WORKFLOW, get_workflow(target_id)
        if is_registered(PIPELINE, target_id) or attempt:
            return PIPELINE, get_pipeline(target_id)  # raises UnknownTarget naming the known ids
        load_entry_points()
    raise AssertionError("unreachable")


def run_window(target_id: str, low: Any = None, high: Any = None, *, params: dict[str, Any] | None = None,
               logical_time: datetime | str | None = None, attempt: int = 1, backfill: int | None = None,
               sleep=None) -> RunReport:
    """Run pipeline (or workflow) `target_id` once for the window [low, high) (datetimes) or (low, high]
    (integers), or with no window (both None): the `RunReport` (`ok`, `rows`, `records`, `failures`).

    `params` are checked against the target's declared params as at every door; `logical_time` is the fire time
    the run stands for (a datetime or ISO text); `backfill` makes `ctx.backfill` truthy, as in a backfill window;
    `sleep` replaces the retry back-off's sleep (tests: `lambda s: None`).
    """
    window = None if low is None and high is None else window_of(low, high)
    when = None if logical_time is None else parse_mark(logical_time, field="logical_time")
    if when is not None and not isinstance(when, datetime):
        raise ConfigError("logical_time", "must be an ISO datetime")
    kind, spec = target_spec(target_id)
    params = dict(params or {})
    check_params(spec.params, params)
    ctx = RunContext(run_id=None, schedule=f"test:{target_id}", window=window, params=params, logical_time=when,
                     attempt=attempt, watermark_column=getattr(spec, "watermark_column", None), backfill=backfill)
    executor = Executor(MemoryLedger(), sleep=sleep)
    if kind == WORKFLOW:
        for node_id, factory in spec.nodes.items():
            executor.add_pipeline(node_id, factory(ctx))
        for upstream, downstream in spec.deps:
            executor.add_dep(downstream, upstream)
    else:
        pipeline = spec.build(ctx)
        if ctx.watermark_column and not pipeline.watermark_column:
            pipeline.watermark_column = ctx.watermark_column
        executor.add_pipeline(target_id, pipeline)
    return executor.run()


def failures(report: RunReport) -> str:
    """The failed nodes' reasons and tracebacks, for an assertion's message: `assert report.ok, failures(report)`."""
    return "\n\n".join(f"{r.task_id}: {r.reason}\n{r.error}".rstrip() for r in report.records if r.reason
                       and r.task_id in report.failed) or "no node failed"


__all__ = ["failures", "parse_mark", "run_window", "window_of"]
