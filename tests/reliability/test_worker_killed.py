"""A worker killed with SIGKILL mid-run: governance finds the lost run, re-queues it, the window loads once."""
from __future__ import annotations

import os
import signal
import sqlite3
import uuid
from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from scheduler.models import AuditEntry, Run, RunStatus, WatermarkState
from scheduler.pipelines import sql_load, sql_stream
from scheduler.pipelines.values import iso_utc
from scheduler.services.runs.queue import run_trigger_manual
from tests.integration.cluster import start_cluster, stop_cluster, wait_until
from tests.reliability import LOST_AFTER_A_KILL

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
MODULES = "scheduler.pipelines.demo,tests.reliability.pipelines"
PG_URL = "postgres://postgres@127.0.0.1:5432/test"  # the sink's database (the pipelines tests' too), either run


def _source(path, base: datetime, n: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, ts TEXT, v TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)",
                         [(i, iso_utc(base + timedelta(seconds=30 * i)), f"v{i}") for i in range(1, n + 1)])


def test_a_worker_killed_mid_copy_into_postgresql_loses_the_open_load_and_the_window_loads_exactly_once(
        make_schedule, tmp_path):
    """SqlSink's PostgreSQL path (COPY into a staging table, then one upsert): killed with the first COPY batch sent
    and its transaction open, nothing of attempt 1 stays; attempt 2 loads every row once."""
    import tests.reliability.pipelines  # noqa: F401  registers the pipeline in this process too

    n = 2 * sql_load.BATCH + 10  # the kill comes as COPY asks for the second batch
    base = datetime.now(timezone.utc) - timedelta(hours=3)
    source, pidfile, table = tmp_path / "source.db", tmp_path / "worker.pid", f"etl_kill_{uuid.uuid4().hex[:10]}"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, ts TEXT, v TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)",
                         [(i, iso_utc(base + timedelta(milliseconds=500 * i)), f"v{i}") for i in range(1, n + 1)])
    schedule = make_schedule(
        "stalling-copy", target_id="reliability.stalling_copy_sync", retry_max_attempts=3,
        watermark_config={"type": "datetime", "column": "ts", "initial": base.isoformat()},
    )
    run = run_trigger_manual(schedule=schedule, actor="tests", params={
        "source": str(source), "target": PG_URL, "table": table, "pidfile": str(pidfile)})
    target = psycopg.connect(PG_URL, autocommit=True)
    _kill_mid_copy_then_reload(run=run, n=n, target=target, table=table, pidfile=pidfile, tmp_path=tmp_path,
                               what="the worker to stall mid-COPY")


def _kill_mid_copy_then_reload(*, run, n: int, target, table: str, pidfile, tmp_path, what: str,
                               drop: tuple[str, ...] = ()) -> None:
    """Start a cluster, SIGKILL the worker once its sink's COPY into the staging table is in flight, and check the
    re-queued run loads the window's `n` rows once, by its second attempt; the target's tables are dropped."""
    log = tmp_path / "cluster.log"
    proc = start_cluster("faults", log_path=log, extra_env={
        "ETL_PIPELINE_MODULES": MODULES, **LOST_AFTER_A_KILL})
    try:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=60, what=what, log_path=log))
        staged = target.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'COPY%%'"
                                " AND query LIKE '%%etl_stage%%'").fetchone()[0]
        assert staged == 1, "the sink's COPY is in flight when the worker dies"
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=90,
                   what="the re-queued run to succeed", log_path=log)
        ids = [row[0] for row in target.execute(f'SELECT id FROM "{table}" ORDER BY id')]
        loads = target.execute(f'SELECT run_id, attempt, n FROM "{table}_loads"').fetchall()
    finally:
        assert stop_cluster(proc) == 0, log.read_text()[-3000:]
        target.execute(", ".join([f'DROP TABLE IF EXISTS "{table}"', f'"{table}_loads"',
                                  *(f'"{name}"' for name in drop)]))
        target.close()
    run.refresh_from_db()
    assert run.attempt == 2
    assert ids == list(range(1, n + 1)), "no gap and no duplicate in the sink"
    assert loads == [(run.pk, 2, n)], "the window was loaded once, by the second attempt"


def test_a_worker_killed_mid_stream_from_postgresql_to_postgresql_loses_the_open_load_and_the_window_loads_once(
        make_schedule, tmp_path):
    """The streamed path (sql_stream.py: the source's COPY piped into the sink's staging table, no row in Python):
    killed with part of the rows in the sink's COPY and its transaction open, nothing of attempt 1 stays; attempt 2
    streams every row once."""
    import tests.reliability.pipelines  # noqa: F401  registers the pipeline in this process too

    n = 3 * sql_stream.WRITE_EVERY + 10  # the kill comes after the first write of blocks
    base = datetime.now(timezone.utc) - timedelta(hours=3)
    pidfile, table = tmp_path / "worker.pid", f"etl_kill_{uuid.uuid4().hex[:10]}"
    target = psycopg.connect(PG_URL, autocommit=True)
    target.execute(f'CREATE TABLE "{table}_src" (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ, v TEXT)')
    target.execute(f'CREATE TABLE "{table}" (id BIGINT PRIMARY KEY, ts TIMESTAMPTZ, v TEXT)')
    target.execute(f'INSERT INTO "{table}_src" SELECT i, %s::timestamptz + i * interval \'1 second\', \'v\' || i'
                   f" FROM generate_series(1, {n}) AS i", [base])
    schedule = make_schedule(
        "stalling-stream", target_id="reliability.stalling_stream_sync", retry_max_attempts=3,
        watermark_config={"type": "datetime", "column": "ts", "initial": base.isoformat()},
    )
    run = run_trigger_manual(schedule=schedule, actor="tests",
                             params={"target": PG_URL, "table": table, "pidfile": str(pidfile)})
    _kill_mid_copy_then_reload(run=run, n=n, target=target, table=table, pidfile=pidfile, tmp_path=tmp_path,
                               what="the worker to stall mid-stream", drop=(f"{table}_src",))


def test_a_killed_worker_is_detected_requeued_and_its_window_is_loaded_exactly_once(make_schedule, tmp_path):
    import tests.reliability.pipelines  # noqa: F401  registers the pipeline in this process too

    base = datetime.now(timezone.utc) - timedelta(hours=3)
    source, target, pidfile = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "worker.pid"
    _source(source, base, 200)
    schedule = make_schedule(
        "stalling", target_id="reliability.stalling_sync", retry_max_attempts=3,
        watermark_config={"type": "datetime", "column": "ts", "initial": base.isoformat()},
    )
    run = run_trigger_manual(schedule=schedule, actor="tests",
                             params={"source": str(source), "target": str(target), "pidfile": str(pidfile)})
    log = tmp_path / "cluster.log"
    proc = start_cluster("faults", log_path=log, extra_env={
        "ETL_PIPELINE_MODULES": MODULES, **LOST_AFTER_A_KILL})
    try:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=60, what="the worker to stall",
                             log_path=log))
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=90,
                   what="the re-queued run to succeed", log_path=log)
    finally:
        assert stop_cluster(proc) == 0, log.read_text()[-3000:]

    run.refresh_from_db()
    assert run.attempt == 2
    assert AuditEntry.objects.filter(action="run.worker_lost.requeued", target_id=str(run.pk)).count() == 1
    with sqlite3.connect(target) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM items ORDER BY id")]
        loads = conn.execute("SELECT run_id, attempt, n FROM loads").fetchall()
    assert ids == list(range(1, 201)), "no gap and no duplicate in the sink"
    assert loads == [(run.pk, 2, 200)], "the window was loaded once, by the second attempt"
    mark = datetime.fromisoformat(WatermarkState.objects.get(schedule=schedule).value)
    assert mark == datetime.fromisoformat(run.window_high) and mark > base + timedelta(seconds=30 * 200)


@pytest.mark.parametrize("workflow, size, killed_at", [
    ("reliability.resumable", 5, 3),
    ("reliability.resumable_1000", 1000, 900),
])
def test_a_workflow_whose_worker_is_killed_keeps_every_finished_node_and_resumes_after_them(
        make_schedule, tmp_path, workflow, size, killed_at):
    import tests.reliability.pipelines  # noqa: F401  registers the workflows in this process too

    from scheduler.models import NodeRecord, TargetKind
    from scheduler.services.runs.nodes import node_records

    target, pidfile = tmp_path / "loads.txt", tmp_path / "worker.pid"
    schedule = make_schedule("resumable", target_kind=TargetKind.WORKFLOW, target_id=workflow, retry_max_attempts=3)
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"target": str(target), "pidfile": str(pidfile)})
    log = tmp_path / "cluster.log"
    proc = start_cluster("faults", log_path=log, extra_env={"ETL_PIPELINE_MODULES": MODULES, **LOST_AFTER_A_KILL})
    finished = [f"n{i}" for i in range(1, killed_at)]  # done before the kill
    rest = [f"n{i}" for i in range(killed_at, size + 1)]

    def stalled():
        if pidfile.exists() and pidfile.read_text():
            return pidfile.read_text()
        # only the first attempt stalls: one that ended before it did (fenced, lost) would leave the test waiting
        now = Run.objects.get(pk=run.pk)
        story = list(AuditEntry.objects.filter(target_id=str(run.pk)).values_list("action", flat=True))
        assert now.attempt == 1, f"attempt 1 ended before n{killed_at}: {now.reason!r} {now.error[-500:]!r} {story}"
        return None

    try:
        # a deadline, not a speed test: 899 nodes on a loaded machine (two passes, four workers) take a while
        pid = int(wait_until(stalled, timeout=60 + size // 10, what=f"the worker to stall at n{killed_at}",
                             log_path=log))
        os.kill(pid, signal.SIGKILL)  # nodes before n<killed_at> are done; n<killed_at> is half-way
        # what the killed worker finished is in the database, one committed row per node
        first = NodeRecord.objects.filter(run=run, run_attempt=1).order_by("id")
        assert [(r.task_id, r.outcome) for r in first] == [(n, "SUCCESS") for n in finished]
        wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=90,
                   what="the re-queued run to succeed", log_path=log)
    finally:
        assert stop_cluster(proc) == 0, log.read_text()[-3000:]

    run.refresh_from_db()
    loads = [tuple(line.split()[1:]) for line in target.read_text().splitlines()]
    # every node loaded exactly once: the finished ones by the killed attempt, the rest by the resumed one
    assert loads == [("1", n) for n in finished] + [("2", n) for n in rest]
    assert [(r.run_attempt, r.task_id, r.resumed) for r in node_records(run)] == (
        [(1, n, False) for n in finished] + [(2, n, True) for n in finished] + [(2, n, False) for n in rest])
    assert run.attempt == 2 and run.report["resumed"] == finished


def test_a_worker_killed_mid_batch_loses_no_run(make_schedule, tmp_path):
    """One worker gets the four runs of a tick in one message; it is killed in the second: the first, a quick run
    whose end the batch's timer wrote while the second stalled (ETL_BATCH_FLUSH_SECONDS is a promise), stays
    SUCCEEDED, the second is re-queued as a lost worker's run (attempt 2), the third and fourth, never begun, are
    sent again without spending an attempt; each runs to the end once."""
    import tests.reliability.pipelines  # noqa: F401  registers the pipeline in this process too

    execlog, pidfile = tmp_path / "executions.db", tmp_path / "worker.pid"
    schedule = make_schedule("batched", target_id="reliability.batch_member", retry_max_attempts=3)
    params = [{}, {"pidfile": str(pidfile)}, {}, {}]  # the first ends well inside the flush interval
    runs = [run_trigger_manual(schedule=schedule, actor="tests", params={"log": str(execlog), **p}) for p in params]
    log = tmp_path / "cluster.log"
    proc = start_cluster("faults", log_path=log, extra_env={
        "ETL_PIPELINE_MODULES": MODULES, **LOST_AFTER_A_KILL,
        "Q_WORKERS": "1", "ETL_BATCH_FLUSH_SECONDS": "0.2"})
    try:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=60,
                             what="the worker to stall in the batch's second run", log_path=log))
        # the second stalls until it is killed: only the batch's timer can write the first's end meanwhile
        wait_until(lambda: Run.objects.get(pk=runs[0].pk).status == RunStatus.SUCCEEDED, timeout=30,
                   what="the first run's end, written while the second stalls", log_path=log)
        first = Run.objects.get(pk=runs[0].pk)
        waiting = Run.objects.filter(pk__in=[r.pk for r in runs[2:]])
        assert {(r.status, r.started_at) for r in waiting} == {(RunStatus.RUNNING, None)}, "later runs wait unclaimed"
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.SUCCEEDED).count() == 4,
                   timeout=90, what="the re-queued runs to succeed", log_path=log)
    finally:
        assert stop_cluster(proc) == 0, log.read_text()[-3000:]

    after = {r.pk: r for r in Run.objects.filter(pk__in=[r.pk for r in runs])}
    assert after[runs[0].pk].attempt == 1 and after[runs[0].pk].finished_at == first.finished_at
    assert [after[r.pk].attempt for r in runs[1:]] == [2, 1, 1], "only the run the worker was running spent one"
    requeued = AuditEntry.objects.filter(action="run.worker_lost.requeued").values_list("target_id", flat=True)
    assert list(requeued) == [str(runs[1].pk)]
    resent = AuditEntry.objects.filter(action="run.redispatch").values_list("target_id", flat=True)
    assert sorted(resent) == sorted(str(r.pk) for r in runs[2:])
    with sqlite3.connect(execlog) as conn:
        executed = sorted(row[0] for row in conn.execute("SELECT run_id FROM executions"))
    assert executed == sorted(r.pk for r in runs), "every run executed to the end exactly once"
