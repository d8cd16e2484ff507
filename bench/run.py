"""Run the benchmark suite and print the table: `make bench` or `.venv/bin/python bench/run.py`.

    bench/run.py                 every scenario at the default sizes, 3 samples each
    bench/run.py --quick         small sizes
    bench/run.py --only 3,5      some scenarios (the others' rows are carried over, marked with their date)
    bench/run.py --samples 5     more samples per scenario (each a fresh process and scratch database)
    bench/run.py --profile       also write pyinstrument profiles to bench/results/profile-*.txt
    bench/run.py --db sqlite     only one database for the scenarios that run on both

Each sample of a scenario runs in its own process against its own scratch
database (SQLite in a temp dir; PostgreSQL: a database created and dropped;
a throwaway redis-server, or BENCH_REDIS_URL, flushed). Every figure is the median of the samples, printed with
its spread (min-max, n); see bench/samples.py. Results go to
bench/results/latest.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import RESULTS, fmt  # noqa: E402
from bench.samples import aggregate, measured, merge_previous, spread  # noqa: E402

SCENARIOS = {
    1: ("s1_throughput", ["sqlite", "postgres"]),
    2: ("s2_latency", ["sqlite", "postgres"]),
    3: ("s3_tick", ["sqlite", "postgres"]),
    4: ("s4_executor", ["sqlite", "postgres"]),
    5: ("s5_core", ["-"]),
    6: ("s6_backfill", ["sqlite", "postgres"]),
    7: ("s7_dashboard", ["postgres", "sqlite"]),
    8: ("s8_governance", ["sqlite", "postgres"]),
    9: ("s9_cancel", ["sqlite", "postgres"]),
    10: ("s10_command", ["sqlite", "postgres"]),
    11: ("s11_runlog", ["sqlite", "postgres"]),
    12: ("s12_start_latency", ["sqlite", "postgres"]),
}


def _only(text: str) -> list[int]:
    try:
        picked = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected scenario numbers like 3 or 1,4, got {text!r}") from None
    unknown = [n for n in picked if n not in SCENARIOS]
    if unknown or not picked:
        raise argparse.ArgumentTypeError(f"unknown scenario {unknown or text!r}; known: 1-{len(SCENARIOS)}")
    return picked


def machine() -> dict:
    def cmd(*args: str) -> str:
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception as exc:  # a missing tool is reported, not fatal
            return f"n/a ({exc})"

    versions = cmd(sys.executable, "-c", "import django, importlib.metadata as m; "
                   "print(django.get_version(), m.version('django-q2'))").split()
    return {
        "nproc": cmd("nproc"), "memory": cmd("free", "-h").splitlines()[1:2], "python": platform.python_version(),
        "django": versions[0] if versions else "?", "django_q2": versions[1] if len(versions) > 1 else "?",
        "sqlite": __import__("sqlite3").sqlite_version,
        "postgresql": cmd("psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", "show server_version"),
        "redis": cmd("redis-cli", "-h", "127.0.0.1", "info", "server").split("redis_version:")[-1].split()[0:1],
        "cpu": next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name")), platform.processor()),
    }


def run_samples(number: int, db: str, args: argparse.Namespace) -> list[dict]:
    """`args.samples` independent runs of one scenario, aggregated: medians with their spread."""
    samples = []
    for i in range(args.samples):
        # the profile (an extra, untimed call inside the scenario) is taken in the first sample only
        samples.append(run_one(number, db, args, profile=args.profile and i == 0))
    return aggregate(samples)


def run_one(number: int, db: str, args: argparse.Namespace, *, profile: bool = False) -> list[dict]:
    module, _ = SCENARIOS[number]
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    cmd = [sys.executable, str(ROOT / "bench" / "scenarios" / f"{module}.py"), "--out", out]
    if db != "-":
        cmd += ["--db", db]
    if args.quick:
        cmd.append("--quick")
    if profile:
        cmd.append("--profile")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    try:
        if proc.returncode != 0:
            raise RuntimeError(
                proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
            )
        data = json.loads(Path(out).read_text())
    except Exception as exc:
        sys.stderr.write(proc.stderr[-3000:])
        data = [{"scenario": number, "title": module, "db": db, "error": str(exc), "rows": [], "details": {}}]
    finally:
        os.unlink(out)
    for item in data:
        item["elapsed_s"] = elapsed
    return data


def _samples(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of samples, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1 sample (figures need 3 for a median with a spread)")
    return value


def table(results: list[dict]) -> str:
    lines = [f"{'#':>2} {'db':<8} {'figure':<64} {'value':>10} {'spread':<22} {'unit':<10} {'target':<12} "
             f"{'met':<4} measured"]
    lines.append("-" * len(lines[0]))
    for res in results:
        if res.get("error"):
            lines.append(f"{res['scenario']:>2} {res['db']:<8} {res['title']}: FAILED: {res['error']}")
            continue
        for row in res["rows"]:
            unit = row["unit"]
            value = fmt(row["value"], unit) if row["value"] is not None else ""
            met = {True: "yes", False: "NO", None: ""}[row["met"]]
            lines.append(f"{res['scenario']:>2} {row['db']:<8} {row['figure'][:64]:<64} {value:>10} "
                         f"{spread(row, fmt):<22} {unit:<10} {row['target']:<12} {met:<4} {measured(res)}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", type=_only, default=sorted(SCENARIOS), help="scenario numbers, e.g. 3 or 1,4")
    parser.add_argument("--db", choices=["sqlite", "postgres"], help="run database-backed scenarios on this one only")
    parser.add_argument("--samples", type=_samples, default=3,
                        help="independent runs per scenario; each figure is their median with min-max (default 3)")
    parser.add_argument("--profile", action="store_true", help="write pyinstrument profiles of the hot parts")
    parser.add_argument("--out", default=str(RESULTS / "latest.json"), help="where the JSON goes")
    args = parser.parse_args()

    started = time.perf_counter()
    results: list[dict] = []
    for number in args.only:
        module, dbs = SCENARIOS[number]
        for db in dbs:
            if args.db and db not in (args.db, "-"):
                continue
            print(f"scenario {number} ({module}) on {db} ...", file=sys.stderr, flush=True)
            done = run_samples(number, db, args)
            for res in done:
                res["carried_over"] = False
            results.extend(done)
            print(table(done).split("\n", 2)[-1], file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    previous = Path(args.out)
    old = None
    if set(args.only) != set(SCENARIOS) or args.db:
        # a partial rerun replaces its own rows and carries the others over, marked with their date
        try:
            old = json.loads(previous.read_text()) if previous.exists() else None
        except ValueError:
            old = None
        if old is not None and old.get("quick") != args.quick:
            old = None  # quick and full sizes never mix in one table
    results = merge_previous(results, old, when=when)
    if old is not None:
        # what one full run would take: the sum of the scenarios' own times
        total = sum(r.get("elapsed_s", 0) for r in results)
    report = {"when": when, "quick": args.quick, "samples": args.samples,
              "total_s": total, "machine": machine(), "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(table(results))
    fresh = sum(1 for r in results if not r.get("carried_over"))
    print(f"\n{fresh} scenario runs measured now ({args.samples} samples each), {len(results) - fresh} carried over; "
          f"{total:.0f} s; results in {os.path.relpath(args.out, ROOT)}")
    return 1 if any(r.get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
