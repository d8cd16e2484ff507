"""Shared plumbing of the benchmark scripts: scratch databases, timing, result rows.

Every scenario runs in its own process so it can point Django at its own
scratch database (a SQLite file in a temp dir, or a PostgreSQL database that
is created and dropped) before `django.setup()` reads the settings.
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import redis

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PG_ADMIN_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres")
PIPELINE_MODULES = "scheduler.pipelines.demo,bench.probe"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# --- scratch databases --------------------------------------------------------

def _pg_url(name: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


@contextlib.contextmanager
def scratch_database(kind: str) -> Iterator[str]:
    """Yield the DATABASE_URL of an empty scratch database; it is removed afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="etl-bench-") as tmp:
            yield f"sqlite:///{tmp}/bench.sqlite3"
        return
    if kind != "postgres":
        raise SystemExit(f"--db: expected sqlite or postgres, got {kind!r}")
    import psycopg

    name = f"bench_etl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url(name)
    finally:
        with contextlib.suppress(Exception):
            from django.db import connections

            connections.close_all()
        with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(url: str, *, migrate: bool = True, **env: str) -> None:
    """Point this process at `url`, set Django up and migrate the scratch database."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("ETL_PIPELINE_MODULES", PIPELINE_MODULES)
    os.environ.setdefault("ETL_LOG_LEVEL", "WARNING")
    os.environ.setdefault("Q_LOG_LEVEL", "WARNING")
    # a queue of our own (the setting behind django-q2's queue name), where start_cluster listens
    os.environ.setdefault("ETL_QUEUE_NAME", "bench")
    os.environ.pop("Q_CLUSTER_NAME", None)  # django-q2 reads it as an alternative cluster's name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "etlsite.settings")
    os.environ.update(env)
    import django

    # resetting between repetitions deletes many rows; Django's query log cap warns about it
    warnings.filterwarnings("ignore", message="Limit for query logging exceeded")
    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def child_env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "Q_CLUSTER_NAME")}
    env = {
        **env,
        "DATABASE_URL": url,
        "ETL_QUEUE_NAME": os.environ.get("ETL_QUEUE_NAME", "bench"),
        "ETL_PIPELINE_MODULES": PIPELINE_MODULES,
        "ETL_LOG_LEVEL": "WARNING",
        "Q_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    return env


# --- measuring ------------------------------------------------------------------

def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank), 0 < p <= 100."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[list[float], Any]:
    """Seconds per call for `repeat` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times, result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def count_queries(fn: Callable[[], Any]) -> tuple[int, float, Any]:
    """(queries, seconds, result) of one call, queries captured like Django's test tools do."""
    from collections import deque

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    # Django keeps the last 9,000 queries only; a tick can run more than that
    if connection.queries_log.maxlen != 1_000_000:
        connection.queries_log = deque(maxlen=1_000_000)
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as ctx:
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
    return len(ctx.captured_queries), elapsed, result


@contextlib.contextmanager
def maybe_profile(name: str, enabled: bool) -> Iterator[None]:
    """With --profile, write a pyinstrument text profile to bench/results/profile-<name>.txt."""
    if not enabled:
        yield
        return
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"profile-{name}.txt"
        path.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
        print(f"  profile written to {path.relative_to(ROOT)}", file=sys.stderr)


# --- results ----------------------------------------------------------------------

class Result:
    """What one scenario reports: rows for the table and free-form details."""

    def __init__(self, scenario: int, title: str, db: str = "-") -> None:
        self.scenario, self.title, self.db = scenario, title, db
        self.rows: list[dict[str, Any]] = []
        self.details: dict[str, Any] = {}

    def add(self, figure: str, value: float | None, unit: str, target: str = "", met: bool | None = None,
            db: str | None = None) -> None:
        self.rows.append({"figure": figure, "value": value, "unit": unit, "target": target, "met": met,
                          "db": db or self.db})

    def to_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "title": self.title, "db": self.db, "rows": self.rows,
                "details": self.details}


def scenario_args(description: str, sizes: dict[str, Any]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    parser.add_argument("--profile", action="store_true", help="write a pyinstrument profile of the hot part")
    parser.add_argument("--out", help="write the result JSON here (default: stdout)")
    for name, default in sizes.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=None)
    return parser


def emit(result: Result | list[Result], out: str | None) -> None:
    data = [r.to_dict() for r in result] if isinstance(result, list) else [result.to_dict()]
    text = json.dumps(data, indent=2, default=str)
    if out:
        Path(out).write_text(text)
    else:
        print(text)


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:
        return "n/a"
    if unit in ("queries", "runs", "windows", "count"):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


# --- real clusters ------------------------------------------------------------------

def start_cluster(url: str, *, log_path: Path, name: str = "bench", **extra: str):
    """`manage.py qcluster` against `url` with the default settings, in its own process group."""
    import subprocess

    env = child_env(url, **extra)
    log = open(log_path, "ab")  # noqa: SIM115  closed with the process
    return subprocess.Popen([sys.executable, "manage.py", "qcluster", "--name", name], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def stop_cluster(proc, timeout: float = 60.0) -> None:
    import signal
    import subprocess

    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def wait_until(predicate: Callable[[], Any], *, timeout: float, what: str, poll: float = 0.05,
               log_path: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    tail = log_path.read_text()[-2000:] if log_path and log_path.exists() else ""
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}\n{tail}")


# --- Redis: a throwaway server, never the machine's (a benchmark flushes its database) -----------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_url() -> str:
    """BENCH_REDIS_URL when set, else a throwaway `redis-server` started once for this process and its children
    (exported as BENCH_REDIS_URL) and stopped at exit."""
    url = os.environ.get("BENCH_REDIS_URL")
    if url:
        return url
    port = _free_port()
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    atexit.register(lambda: (proc.terminate(), proc.wait(10)))
    url = f"redis://127.0.0.1:{port}/0"
    wait_until(lambda: redis.Redis.from_url(url, socket_timeout=1).ping() if _answers(port) else False,
               timeout=10, what=f"the throwaway redis-server on port {port}")
    os.environ["BENCH_REDIS_URL"] = url
    return url


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def __getattr__(name: str) -> Any:
    # `from bench.common import REDIS_URL` keeps working; the server starts only when a scenario asks for it
    if name == "REDIS_URL":
        return redis_url()
    raise AttributeError(name)


def flush_redis(url: str | None = None) -> None:
    redis.Redis.from_url(url or redis_url()).flushdb()
