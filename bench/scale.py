"""History at scale (issue 25): the ticks and the pages with a large history, and a dispatch tick during a prune.

    .venv/bin/python bench/scale.py --db sqlite --runs 1000000
    .venv/bin/python bench/scale.py --db postgres --runs 10000000 --keep      # keep the database for a rerun
    .venv/bin/python bench/scale.py --db postgres --runs 10000000 --reuse --prune 1000000 --drop
    .venv/bin/python bench/scale.py --db postgres --runs 1000000 --reuse --pages timeline   # those pages alone
    .venv/bin/python bench/scale.py --compare bench/results/scale-postgres-10000.json \\
        bench/results/scale-postgres-10000000.json                            # the ratio table

The history is written by bench/history.py into a database of its own (PostgreSQL: `bench_scale_<runs>`,
SQLite: a file under --sqlite-dir); `--reuse` measures an existing one again (after `migrate`, which applies
any new migration: its time is recorded). Then `--samples` measuring processes, each fresh, each:

* times `--ticks` dispatch ticks and governance ticks in-process, as the loops call them
  (`dispatch_tick(now=..., holder=...)` with the broker hand-off stubbed out; before each dispatch tick, outside
  the timed part, 10 schedules are made due, and the runs it made are deleted after it);
* starts the web server exactly as `manage.py serve --no-cluster` does (gunicorn with the product's settings,
  DEBUG off), logs in as a superuser, and times `--requests` sequential GETs of each page: p50, p95, the HTML
  size, and the page's query count (one extra request on the test client).

`--prune N` (destructive, last) then runs `manage.py prune_history --older-than ...` so that about N of the
oldest runs go, once per sample (each sample the next N), and times dispatch ticks while each prune runs.
Each figure is the median of the samples with its spread (bench/samples.py); `uptime`'s load averages are
recorded with each sample. Results: bench/results/scale-<db>-<runs>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from django.db import DatabaseError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import PG_ADMIN_URL, RESULTS, Result, child_env, pct, setup_django  # noqa: E402
from bench.run import machine  # noqa: E402
from bench.samples import aggregate  # noqa: E402
from bench.scale_pages import time_pages  # noqa: E402
from bench.scale_report import compare, table  # noqa: E402
from bench.scale_ticks import DUE_PER_TICK, due_schedules, time_ticks  # noqa: E402


def database_url(args: argparse.Namespace) -> str:
    if args.db == "sqlite":
        Path(args.sqlite_dir).mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{Path(args.sqlite_dir) / f'scale-{args.runs}.sqlite3'}"
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{args.name or f'bench_scale_{args.runs}'}"


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        conn.execute(sql)


def create_database(args: argparse.Namespace, url: str) -> None:
    if args.db == "sqlite":
        path = Path(url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    name = url.rpartition("/")[2]
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _pg_admin(f'CREATE DATABASE "{name}"')


def drop_database(args: argparse.Namespace, url: str) -> None:
    if args.db == "sqlite":
        create_database(args, url)  # removes the files
    else:
        _pg_admin(f'DROP DATABASE IF EXISTS "{url.rpartition("/")[2]}" WITH (FORCE)')


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- one measuring process --------------------------------------------------------------------------------


def sample(args: argparse.Namespace, url: str) -> list[dict]:
    setup_django(url, migrate=False)
    from scheduler.models import Run

    result = Result(25, f"history at scale, {args.runs:,} runs", args.db)
    before = load()
    ticks = {} if args.pages else time_ticks(args.ticks, args.page_seconds)  # --pages: those pages alone
    pages = time_pages(url, args.requests, args.page_seconds, args.pages)
    for name in ticks:
        for p in ("p50", "p95"):
            result.add(f"{name} tick {p}", ticks[name][p], "ms", "<= 100 ms" if name == "dispatch" else "")
        result.add(f"{name} tick queries", ticks[name]["queries"], "queries")
    for label, fig in pages.items():
        result.add(f"{label} p50", fig["p50"], "ms")
        result.add(f"{label} p95", fig["p95"], "ms", "<= 100 ms" if args.db == "postgres" else "")
        result.add(f"{label} HTML", fig["kb"], "KB", "<= 100 KB")
        result.add(f"{label} queries", fig["queries"], "queries")
    result.details = {"runs": Run.objects.count(), "load_before": before, "load_after": load(), "ticks": ticks,
                      "pages": pages}
    return [result.to_dict()]


def prune_sample(args: argparse.Namespace, url: str, index: int) -> list[dict]:
    """Dispatch ticks while `prune_history` deletes about args.prune runs (the next slice of the oldest)."""
    setup_django(url, migrate=False)
    from unittest import mock

    from django.db import connection
    from django.utils import timezone as tz

    from scheduler.models import Run
    from scheduler.services.admission.dispatch import dispatch_tick

    total = Run.objects.count()
    # older than the args.prune-th oldest run (ids grow with time): about args.prune runs to delete
    edge = Run.objects.order_by("id").values_list("queued_at", flat=True)[min(args.prune, total - 1)]
    hours = max(1, int((tz.now() - edge).total_seconds() // 3600))
    age = f"{hours}h" if hours < 100_000 else f"{hours // 24}d"  # an age is at most five digits
    env = child_env(url, DEBUG="0")
    result = Result(25, f"dispatch tick during a prune of ~{args.prune:,} runs", args.db)
    before = load()
    started = time.perf_counter()
    errors = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "manage.py", "prune_history", "--older-than", age, "--json"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
    times: list[float] = []
    failed: list[str] = []
    stop_at = time.monotonic() + args.prune_seconds
    with mock.patch("scheduler.services.admission.dispatch.enqueue_execution"):
        while proc.poll() is None:
            if time.monotonic() > stop_at:  # long enough beside it: stop the prune (a batch is one transaction)
                proc.terminate()  # SIGTERM: a background job ignores SIGINT
                proc.wait(60)
                break
            with due_schedules(DUE_PER_TICK):
                t0 = time.perf_counter()
                try:
                    dispatch_tick(now=tz.now(), holder="bench")
                except DatabaseError as exc:  # a deadlock with the prune: the loop would log it and tick again
                    failed.append(str(exc).splitlines()[0])
                    connection.close()
                times.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.1)  # the loop's pace (ETL_DISPATCH_INTERVAL)
    elapsed = time.perf_counter() - started
    out = proc.stdout.read()
    if proc.returncode and time.monotonic() <= stop_at:  # it failed on its own: no figure is worth keeping
        errors.seek(0)
        raise SystemExit(f"prune_history --older-than {age} exited with {proc.returncode}: {errors.read()[-2000:]}")
    counts = json.loads(out)["counts"] if proc.returncode == 0 else {"stopped": proc.returncode}
    deleted = total - Run.objects.count()
    result.add("dispatch tick during the prune, p50", pct(times, 50), "ms", "<= 100 ms")
    result.add("dispatch tick during the prune, p95", pct(times, 95), "ms", "<= 100 ms")
    result.add("dispatch tick during the prune, max", max(times) if times else None, "ms")
    result.add("dispatch ticks failed during the prune", len(failed), "count", "<= 0")
    result.add("runs deleted while measured", deleted, "runs")
    result.add("prune time (stopped after --prune-seconds if not done)", elapsed, "s")
    result.add("prune rate", deleted / elapsed, "runs/s")
    result.details = {"older_than_h": hours, "ticks": len(times), "failed": failed[:20], "counts": counts,
                      "load_before": before, "load_after": load(), "runs_before": total}
    return [result.to_dict()]


def run_child(args: argparse.Namespace, url: str, *extra: str) -> list[dict]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    cmd = [sys.executable, __file__, "--db", args.db, "--runs", str(args.runs), "--child-url", url, "--out", out,
           "--requests", str(args.requests), "--page-seconds", str(args.page_seconds), "--ticks", str(args.ticks),
           "--prune", str(args.prune), "--prune-seconds", str(args.prune_seconds),
           *(["--pages", args.pages] if args.pages else []), *extra]
    proc = subprocess.run(cmd, cwd=ROOT)
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"measuring process exited with {proc.returncode}")
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--runs", type=int, default=10_000, help="runs in the history (default 10,000)")
    parser.add_argument("--samples", type=int, default=3, help="measuring processes (default 3)")
    parser.add_argument("--requests", type=int, default=60, help="timed GETs of each page per sample (default 60)")
    parser.add_argument("--page-seconds", type=float, default=40.0,
                        help="time budget per page per sample: at least 15 requests, then up to --requests (40 s)")
    parser.add_argument("--ticks", type=int, default=30, help="timed ticks of each loop per sample (default 30)")
    parser.add_argument("--prune", type=int, default=0, help="then time dispatch ticks while a prune deletes "
                        "about this many runs, once per sample (destructive; default 0: no prune)")
    parser.add_argument("--prune-seconds", type=float, default=600.0,
                        help="stop each prune after this long (its rate is recorded; default 600 s)")
    parser.add_argument("--days", type=int, default=365, help="the days the history spans (default 365); fewer "
                        "give the runs per hour of a larger history (1,000,000 over 37: 10,000,000 over a year)")
    parser.add_argument("--reuse", action="store_true", help="measure the existing database again (after migrate)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards (default: keep only with "
                        "--reuse or --keep)")
    parser.add_argument("--drop", action="store_true", help="drop the database at the end")
    parser.add_argument("--no-pages", action="store_true", help="skip the ticks and pages (with --prune)")
    parser.add_argument("--pages", help="measure only the pages whose label holds one of these comma-separated "
                        "words (e.g. 'timeline'), and no ticks")
    parser.add_argument("--name", help="PostgreSQL database name (default bench_scale_<runs>)")
    parser.add_argument("--sqlite-dir", default=str(Path(tempfile.gettempdir()) / "etl-scale"))
    parser.add_argument("--out", help="results JSON (default bench/results/scale-<db>-<runs>.json)")
    parser.add_argument("--compare", nargs=2, metavar="JSON", help="print the table of two results files")
    parser.add_argument("--child-url", help=argparse.SUPPRESS)
    parser.add_argument("--prune-index", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compare:
        small, large = (json.loads(Path(p).read_text()) for p in args.compare)
        print(table(compare(small, large), f"{small['runs']:,} runs", f"{large['runs']:,} runs"))
        return 0
    if args.runs < 1000 or args.samples < 1 or args.days < 1:
        parser.error("--runs: at least 1,000; --samples, --days: at least 1")
    if args.child_url:
        data = (prune_sample(args, args.child_url, args.prune_index) if args.prune_index >= 0
                else sample(args, args.child_url))
        Path(args.out).write_text(json.dumps(data, default=str))
        return 0
    return orchestrate(args)


def orchestrate(args: argparse.Namespace) -> int:
    url = database_url(args)
    report: dict = {"db": args.db, "runs": args.runs, "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": machine(), "load_start": load()}
    env_url = os.environ.get("DATABASE_URL")
    t0 = time.perf_counter()
    if not args.reuse:
        create_database(args, url)
    os.environ["DATABASE_URL"] = url
    setup_django(url, migrate=False)
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone as tz

    from bench.history import count_rows, generate_history

    call_command("migrate", verbosity=0, interactive=False)
    report["migrate_s"] = time.perf_counter() - t0
    if args.reuse:
        # statistics for the indexes a migration just added, as the generator leaves them for its own: without
        # them SQLite's planner takes a new index for the most selective one and plans go 30x slower
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    out = Path(args.out or RESULTS / f"scale-{args.db}-{args.runs}.json")
    if args.reuse and not count_rows()["run"]:
        raise SystemExit(f"--reuse: {url} holds no history; generate it first (without --reuse)")
    if args.reuse:  # the generation's own figures stay with the results of the database it made
        made = json.loads(out.read_text()).get("history", {}) if out.exists() else {}
        report["history"] = {**made, "reused": True, "rows_now": count_rows()}
    else:
        print(f"generating {args.runs:,} runs on {args.db} ...", file=sys.stderr, flush=True)
        report["history"] = generate_history(runs=args.runs, now=tz.now(), days=args.days,
                                             progress=lambda line: print(line, file=sys.stderr, flush=True))
    from django.db import connections

    connections.close_all()
    if not args.no_pages:
        samples = []
        for i in range(args.samples):
            print(f"sample {i + 1}/{args.samples} ...", file=sys.stderr, flush=True)
            samples.append(run_child(args, url))
        report["results"] = aggregate(samples)
    if args.prune:
        samples = []
        for i in range(args.samples):
            print(f"prune sample {i + 1}/{args.samples} ...", file=sys.stderr, flush=True)
            samples.append(run_child(args, url, "--prune-index", str(i)))
        report["prune"] = aggregate(samples)
    report["load_end"] = load()
    if out.exists() and args.no_pages:  # a prune-only run adds its rows to the pages' results
        old = json.loads(out.read_text())
        if args.prune:
            report = {**old, "prune": report["prune"], "prune_when": report["when"], "prune_load": report["load_end"]}
        else:  # generation only: the new history's figures, for a later --reuse; the pages' results stay
            report = {**old, "history": report["history"]}
    out.write_text(json.dumps(report, indent=2, default=str))
    for part in ("results", "prune"):
        for res in report.get(part, []):
            for row in res["rows"]:
                print(f"{row['figure']:<44} {row['value'] if row['value'] is not None else '-':>12} {row['unit']}")
    print(f"results in {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    if args.drop or not (args.keep or args.reuse):
        drop_database(args, url)
    if env_url is not None:
        os.environ["DATABASE_URL"] = env_url
    return 0


if __name__ == "__main__":
    sys.exit(main())
