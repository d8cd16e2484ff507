"""Pipelines for the multi-process tests; the clusters import this through ETL_PIPELINE_MODULES.

`itest.record` appends "start"/"end" lines (run id, attempt, pid) to the file
named in params["record"], and sleeps params["sleep"] seconds (or
params["first_attempt_sleep"] on attempt 1, so a run whose worker is killed
can finish quickly when it is re-queued). `itest.cooperative` and
`itest.stubborn` write their worker's pid to params["pidfile"] and then wait:
the first checks for a stop request every 50 ms, the second sleeps in one C
call that no request reaches (tests/integration/test_run_control.py).
"""
from __future__ import annotations

import os
import time

from scheduler.core import IdentityTransform, Pipeline
from scheduler.pipelines.context import RunContext
from scheduler.pipelines.noop import NoopSink
from scheduler.pipelines.registry import register_pipeline


def _log(path: str, event: str, ctx: RunContext) -> None:
    # one small O_APPEND write per line: lines from several processes never interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {ctx.run_id} {ctx.attempt} {os.getpid()}\n".encode())
    finally:
        os.close(fd)


class RecordingSource:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def extract(self):
        params = self.ctx.params
        path = params.get("record")
        seconds = float(params.get("sleep", 0))
        if self.ctx.attempt == 1 and "first_attempt_sleep" in params:
            seconds = float(params["first_attempt_sleep"])
        if path:
            _log(path, "start", self.ctx)
        time.sleep(seconds)
        if path:
            _log(path, "end", self.ctx)
        return []


def recording(ctx: RunContext) -> Pipeline:
    return Pipeline(RecordingSource(ctx), IdentityTransform(), NoopSink())


register_pipeline("itest.record", recording, replace=True)


class GatedSource:
    """Logs a line, then waits for the file params["release"] to exist (at most a minute), then logs again."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def extract(self):
        import logging

        log = logging.getLogger("itest.gated")
        log.info("step 1: waiting for %s", self.ctx.params.get("release"))
        deadline = time.monotonic() + 60
        while not os.path.exists(self.ctx.params["release"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        log.info("step 2: released")
        return [{"id": 1}]


register_pipeline("itest.gated", lambda ctx: Pipeline(GatedSource(ctx), IdentityTransform(), NoopSink()), replace=True)


def _write_pid(path: str) -> None:
    # written whole, then renamed: a test polling the file never reads half a pid
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(str(os.getpid()))
    os.replace(tmp, path)


class CooperativeSource:
    """Writes the worker's pid to params["pidfile"], then works in small steps and checks for a stop between them
    (at most a minute): a cancel reaches it at the next step."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def extract(self):
        _write_pid(self.ctx.params["pidfile"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.ctx.check_cancelled()
            time.sleep(0.05)
        return []


register_pipeline("itest.cooperative",
                  lambda ctx: Pipeline(CooperativeSource(ctx), IdentityTransform(), NoopSink()), replace=True)


class StubbornSource:
    """Writes the worker's pid to params["pidfile"], then sleeps params["sleep"] seconds in one C call: no stop
    request reaches it (only ending its worker process stops it)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def extract(self):
        _write_pid(self.ctx.params["pidfile"])
        time.sleep(float(self.ctx.params.get("sleep", 120)))
        return []


register_pipeline("itest.stubborn",
                  lambda ctx: Pipeline(StubbornSource(ctx), IdentityTransform(), NoopSink()), replace=True)
