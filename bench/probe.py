"""Loaded into the benchmark's qcluster processes through ETL_PIPELINE_MODULES: a finish probe and pipelines.

When ETL_BENCH_DONE_FILE is set, every task the cluster finishes appends the
finish time to that file (django-q2 sends `post_execute` from its monitor
process after the task is acknowledged). That gives raw django-q2 and the
scheduler the same finish clock even though django-q2 keeps no record of
successful tasks with `save_limit = -1`. A message that carried a batch of k
runs (`scheduler.tasks.execute_runs`) writes k lines: k runs finished.
"""
from __future__ import annotations

import os
import time

_path = os.environ.get("ETL_BENCH_DONE_FILE")

if _path:
    from django_q.signals import post_execute

    def _done(sender, task, **kwargs) -> None:
        runs = len(task["args"][0]) if task.get("func") == "scheduler.tasks.execute_runs" and task.get("args") else 1
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{time.time():.6f}\n".encode() * runs)
        finally:
            os.close(fd)

    post_execute.connect(_done, dispatch_uid="etl-bench-probe", weak=False)


# --- pipelines of the benchmark (scenario 9: cancel to stopped) -----------------------

from scheduler.core import IdentityTransform, Pipeline  # noqa: E402
from scheduler.pipelines.noop import NoopSink  # noqa: E402
from scheduler.pipelines.registry import register_pipeline  # noqa: E402

COOPERATIVE_SLEEP = 0.05  # seconds between two checks: what a well-behaved pipeline between batches looks like


class _UntilCancelled:
    """A source that works in short steps and checks for a stop request between them, for ever."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def extract(self):
        while True:
            self.ctx.check_cancelled()
            time.sleep(COOPERATIVE_SLEEP)


register_pipeline("bench.cooperative", lambda ctx: Pipeline(_UntilCancelled(ctx), IdentityTransform(), NoopSink()),
                  description="loops on ctx.check_cancelled() with a 50 ms sleep until it is stopped", replace=True)


# --- scenario 12: the first line of a pipeline's code -------------------------------

_first_line = os.environ.get("ETL_BENCH_FIRST_LINE_FILE")


def _first_line_pipeline(ctx):
    """The pipeline's factory is the first of a team's code a run calls: it writes `run id, time` and does nothing."""
    if _first_line:
        fd = os.open(_first_line, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{ctx.run_id} {time.time():.6f}\n".encode())
        finally:
            os.close(fd)
    from scheduler.pipelines.noop import NoopSource

    return Pipeline(NoopSource(), IdentityTransform(), NoopSink())


register_pipeline("bench.first_line", _first_line_pipeline, replace=True,
                  description="records when its code begins (ETL_BENCH_FIRST_LINE_FILE), then does nothing")
