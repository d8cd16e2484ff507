"""Pipelines for the fault tests, imported by real cluster processes via ETL_PIPELINE_MODULES."""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import psycopg

from scheduler.core import Pipeline
from scheduler.pipelines.registry import register_pipeline, register_workflow
from scheduler.pipelines import sql_load, sql_stream
from scheduler.pipelines.sql import SqlSink, SqlSource


class StallOnFirstAttempt:
    """Writes the worker's pid, then stalls (attempt 1 only) so a test can SIGKILL it mid-run."""

    def __init__(self, pidfile: str, attempt: int) -> None:
        self.pidfile, self.attempt, self.stalled = Path(pidfile), attempt, False

    def apply(self, record):
        if self.attempt == 1 and not self.stalled:
            self.stalled = True
            self.pidfile.write_text(str(os.getpid()))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # the test kills us long before this ends
                time.sleep(0.05)
        yield record


class LoggedSink:
    """Upserts rows and logs every completed load, so a test can count loads per window."""

    def __init__(self, target: str, run_id: int, attempt: int) -> None:
        self.inner = SqlSink(f"sqlite:///{target}", table="items", key="id", create=True)
        self.target, self.run_id, self.attempt = target, run_id, attempt

    def load(self, rows):
        count = self.inner.load(rows)
        with sqlite3.connect(self.target) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS loads (run_id INTEGER, attempt INTEGER, n INTEGER)")
            conn.execute("INSERT INTO loads VALUES (?, ?, ?)", (self.run_id, self.attempt, count))
        return count


def stalling_sync(ctx):
    p = ctx.params
    return Pipeline(
        SqlSource(f"sqlite:///{p['source']}", table="items", watermark_column="ts", window=ctx.window),
        StallOnFirstAttempt(p["pidfile"], ctx.attempt),
        LoggedSink(p["target"], ctx.run_id, ctx.attempt),
        watermark_column="ts",
    )


register_pipeline("reliability.stalling_sync", stalling_sync, watermark_column="ts", replace=True)


class _StallMidCopy(list):
    """The rows SqlSink's COPY writes; the worker stalls (attempt 1) when COPY asks for the second batch, the first
    sent and its transaction open, so a test can SIGKILL it mid-load."""

    def __init__(self, rows, pidfile: str) -> None:
        super().__init__(rows)
        self.stall = StallOnFirstAttempt(pidfile, 1)

    def __getitem__(self, index):
        if isinstance(index, slice) and index.start == sql_load.BATCH:
            next(self.stall.apply(None))
        return super().__getitem__(index)


class CopyLoggedSink(SqlSink):
    """A PostgreSQL SqlSink (the COPY path) that stalls mid-COPY on attempt 1 and logs every completed load."""

    def __init__(self, target: str, table: str, run_id: int, attempt: int, pidfile: str) -> None:
        super().__init__(target, table=table, key="id", create=True)
        self.run_id, self.attempt, self.pidfile = run_id, attempt, pidfile

    def _write(self, cur, db, columns, tuples, keys):
        if self.attempt == 1:
            tuples = _StallMidCopy(tuples, self.pidfile)
        super()._write(cur, db, columns, tuples, keys)

    def load(self, rows):
        count = super().load(rows)
        with psycopg.connect(self.db, autocommit=True) as conn:
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{self.table}_loads" (run_id INTEGER, attempt INTEGER, n INTEGER)'
            )
            conn.execute(f'INSERT INTO "{self.table}_loads" VALUES (%s, %s, %s)', (self.run_id, self.attempt, count))
        return count


def stalling_copy_sync(ctx):
    p = ctx.params
    return Pipeline(
        SqlSource(f"sqlite:///{p['source']}", table="items", watermark_column="ts", window=ctx.window), None,
        CopyLoggedSink(p["target"], p["table"], ctx.run_id, ctx.attempt, p["pidfile"]), watermark_column="ts",
    )


register_pipeline("reliability.stalling_copy_sync", stalling_copy_sync, watermark_column="ts", replace=True)


class StreamLoggedSink(SqlSink):
    """A PostgreSQL SqlSink fed by a PostgreSQL SqlSource, so the rows stream by COPY with none in Python
    (sql_stream.py); it stalls mid-stream on attempt 1 (one write of the source's blocks sent, its transaction
    open) and logs every completed load."""

    def __init__(self, target: str, table: str, run_id: int, attempt: int, pidfile: str) -> None:
        super().__init__(target, table=table, key="id")
        self.run_id, self.attempt, self.pidfile = run_id, attempt, pidfile

    def pipe(self, out, into):
        blocks = iter(out)
        into.write(b"".join(next(blocks) for _ in range(sql_stream.WRITE_EVERY)))
        if self.attempt == 1:
            next(StallOnFirstAttempt(self.pidfile, 1).apply(None))
        sql_stream.pipe_blocks(blocks, into)

    def stream_from(self, source, *, watermark_column=None):
        streamed = super().stream_from(source, watermark_column=watermark_column)
        assert streamed is not None, "the rows were to stream"
        with psycopg.connect(self.db, autocommit=True) as conn:
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{self.table}_loads" (run_id INTEGER, attempt INTEGER, n INTEGER)'
            )
            conn.execute(
                f'INSERT INTO "{self.table}_loads" VALUES (%s, %s, %s)', (self.run_id, self.attempt, streamed[0])
            )
        return streamed


def stalling_stream_sync(ctx):
    p = ctx.params
    return Pipeline(
        SqlSource(p["target"], table=f"{p['table']}_src", watermark_column="ts", window=ctx.window), None,
        StreamLoggedSink(p["target"], p["table"], ctx.run_id, ctx.attempt, p["pidfile"]), watermark_column="ts",
    )


register_pipeline("reliability.stalling_stream_sync", stalling_stream_sync, watermark_column="ts", replace=True)


# --- in-process fault injection for the watermark property test -------------------------
class FaultPlan:
    """What the next execution of reliability.faulty does wrong (set by the test)."""

    rows: list[dict] = []  # the source table
    target: dict[int, dict] = {}  # the sink table (upsert on id)
    fault: str = "none"
    on_load = None  # optional callback run after the sink loaded


class _Source:
    def __init__(self, window):
        self.window = window

    def extract(self):
        if FaultPlan.fault == "extract_error":
            raise RuntimeError("source unavailable")
        return [r for r in FaultPlan.rows if self.window.contains(r["ts"])]  # [low, high)


class _Sink:
    def load(self, rows):
        for row in rows:
            FaultPlan.target[row["id"]] = row
        if FaultPlan.on_load is not None:
            FaultPlan.on_load()
        if FaultPlan.fault == "crash_after_load":
            raise RuntimeError("connection reset after the load")
        return len(rows)


def faulty(ctx):
    from scheduler.core import RetryPolicy

    return Pipeline(_Source(ctx.window), None, _Sink(), policy=RetryPolicy(max_attempts=1), watermark_column="ts",
                    sleep=lambda s: None)


register_pipeline("reliability.faulty", faulty, watermark_column="ts", replace=True)


# --- a slow pipeline that records every execution ----------------------------------------
class _SleepySource:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def extract(self):
        time.sleep(self.seconds)
        return [{"n": 1}]


class _ExecutionLog:
    def __init__(self, path: str, run_id: int) -> None:
        self.path, self.run_id = path, run_id

    def load(self, rows):
        with sqlite3.connect(self.path, timeout=30) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS executions (run_id INTEGER, pid INTEGER)")
            conn.execute("INSERT INTO executions VALUES (?, ?)", (self.run_id, os.getpid()))
        return len(rows)


def sleepy(ctx):
    return Pipeline(_SleepySource(float(ctx.params.get("seconds", 0.5))), None,
                    _ExecutionLog(ctx.params["log"], ctx.run_id))


register_pipeline("reliability.sleepy", sleepy, replace=True)


# --- the soak test's pipeline: short, and fails at a given rate --------------------------
class _ChaosSource:
    def __init__(self, fail_rate: float, seconds: float) -> None:
        self.fail_rate, self.seconds = fail_rate, seconds

    def extract(self):
        import random

        time.sleep(random.random() * self.seconds)
        if random.random() < self.fail_rate:
            raise RuntimeError("chaos: injected failure")
        return [{"n": 1}]


class _CountSink:
    def load(self, rows):
        return len(rows)


def chaos(ctx):
    from scheduler.core import RetryPolicy

    return Pipeline(_ChaosSource(float(ctx.params.get("fail_rate", 0.1)), float(ctx.params.get("seconds", 0.2))),
                    None, _CountSink(), policy=RetryPolicy(max_attempts=1))


register_pipeline("reliability.chaos", chaos, replace=True)


# --- a fast integer-window loader for the backfill kill test ------------------------------
class _RangeSource:
    """Rows id = low+1 .. high of an integer window (the source holds every id)."""

    def __init__(self, window, seconds: float) -> None:
        self.window, self.seconds = window, seconds

    def extract(self):
        time.sleep(self.seconds)
        return [{"id": i, "v": f"v{i}"} for i in range(int(self.window.low) + 1, int(self.window.high) + 1)]


class _WindowSink:
    """Upserts rows and logs (run, low, high, rows) in one sqlite transaction per window load."""

    def __init__(self, path: str, run_id: int, window) -> None:
        self.path, self.run_id, self.window = path, run_id, window

    def load(self, rows):
        with sqlite3.connect(self.path, timeout=30) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, v TEXT)")
            conn.execute("CREATE TABLE IF NOT EXISTS loads (run_id INTEGER, low INTEGER, high INTEGER, n INTEGER)")
            conn.executemany("INSERT OR REPLACE INTO items VALUES (:id, :v)", rows)
            conn.execute("INSERT INTO loads VALUES (?, ?, ?, ?)",
                         (self.run_id, int(self.window.low), int(self.window.high), len(rows)))
        return len(rows)


def windows(ctx):
    from scheduler.core import RetryPolicy

    return Pipeline(_RangeSource(ctx.window, float(ctx.params.get("seconds", 0.02))), None,
                    _WindowSink(ctx.params["target"], ctx.run_id, ctx.window), policy=RetryPolicy(max_attempts=1),
                    watermark_column="id")


register_pipeline("reliability.windows", windows, watermark_column="id", replace=True)


# --- start/end log for the two-cluster test (class limits, duplicates) ---------------------
class _StartEndSource:
    def __init__(self, ctx) -> None:
        self.ctx = ctx

    def _log(self, event: str) -> None:
        # one O_APPEND write per line: lines from several processes never interleave
        fd = os.open(self.ctx.params["record"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{event} {self.ctx.run_id} {time.time():.6f} {os.getpid()}\n".encode())
        finally:
            os.close(fd)

    def extract(self):
        from scheduler.core import stop

        self._log("start")
        # a stop (a fence, a cancel) ends the code here, and says when: the test's overlap count then closes this
        # attempt at the moment it stopped, not at the next kill
        if stop.current().wait(float(self.ctx.params.get("sleep", 0.2))):
            self._log("stop")
            stop.check()
        self._log("end")
        return []


def start_end(ctx):
    from scheduler.core import RetryPolicy

    return Pipeline(_StartEndSource(ctx), None, _CountSink(), policy=RetryPolicy(max_attempts=1))


register_pipeline("reliability.start_end", start_end, replace=True)


# --- workflows whose worker is killed at a node (the third of 5, the 900th of 1,000) ------------


class _OneRecord:
    def __init__(self, node: str) -> None:
        self.node = node

    def extract(self):
        return [{"id": 1, "node": self.node}]


class _NodeLog:
    """Appends a line 'run attempt node' for every completed node load (one write: a kill keeps it or not)."""

    def __init__(self, target: str, run_id: int, attempt: int, node: str) -> None:
        self.target, self.run_id, self.attempt, self.node = target, run_id, attempt, node

    def load(self, rows):
        with open(self.target, "a") as fh:
            fh.write(f"{self.run_id} {self.attempt} {self.node}\n")
        return len(rows)


def _resumable_node(node: str, stall_at: str):
    def factory(ctx):
        p = ctx.params
        stall = StallOnFirstAttempt(p["pidfile"], ctx.attempt) if node == stall_at else None
        return Pipeline(_OneRecord(node), stall, _NodeLog(p["target"], ctx.run_id, ctx.attempt, node))

    return factory


def register_resumable(workflow_id: str, size: int, stall_at: int) -> list[str]:
    """A chain n1 -> ... -> n<size> whose first attempt stalls at n<stall_at> for the test to SIGKILL it."""
    nodes = [f"n{i}" for i in range(1, size + 1)]
    register_workflow(workflow_id, {n: _resumable_node(n, f"n{stall_at}") for n in nodes},
                      list(zip(nodes, nodes[1:])), replace=True)
    return nodes


RESUMABLE = register_resumable("reliability.resumable", 5, stall_at=3)
RESUMABLE_1000 = register_resumable("reliability.resumable_1000", 1000, stall_at=900)


# --- a member of a batch: sleeps, may stall (attempt 1) so a test can kill its worker mid-batch ------------
def batch_member(ctx):
    p = ctx.params
    stall = StallOnFirstAttempt(p["pidfile"], ctx.attempt) if p.get("pidfile") else None
    return Pipeline(_SleepySource(float(p.get("seconds", 0))), stall, _ExecutionLog(p["log"], ctx.run_id))


register_pipeline("reliability.batch_member", batch_member, replace=True)
