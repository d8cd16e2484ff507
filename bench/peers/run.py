"""Ours against Luigi, Dagster, Prefect and Airflow on the same workload, side by side.

    bash bench/peers/install.sh && .venv/bin/python bench/peers/run.py     (or: make bench-peers)

Workload: N no-op tasks as a chain and as a fan-out, N = 10 and 100, each
tool in its local mode, each run as a fresh process (imports and start-up
included, as a user would pay them). Per run: whole-process wall time, CPU
(user + system of the process and the children it waited for, from wait4's
rusage) and peak memory (ru_maxrss); each script also prints the time of the
workflow call itself (start-up excluded). Per tool: marginal cost per task
(t(100) - t(10)) / 90 from the workflow time (whole-process wall time is
dominated by start-up noise of +-100 ms, more than ours' whole 90 extra
tasks), and every figure as a ratio against ours.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PEERS_DIR = Path(os.environ.get("PEERS_DIR", "/tmp/etl-peers"))
TOOLS = ["ours", "luigi", "dagster", "prefect", "airflow"]
SHAPES = ["chain", "fanout"]
SIZES = [10, 100]


def python_for(tool: str) -> Path:
    return ROOT / ".venv" / "bin" / "python" if tool == "ours" else PEERS_DIR / tool / "venv" / "bin" / "python"


def unavailable(tool: str) -> str:
    """Why a peer cannot run here ('' when it can)."""
    if tool == "ours":
        return ""
    failed = PEERS_DIR / tool / "FAILED"
    if failed.exists():
        return f"install failed: {failed.read_text().strip()[-1500:]}"
    if not python_for(tool).exists():
        return f"not installed: run bash bench/peers/install.sh {tool}"
    return ""


def tool_env(tool: str, scratch: Path, ours_db: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    if tool == "ours":
        env.update(DATABASE_URL=ours_db, ETL_LOG_LEVEL="WARNING", ETL_VAR_DIR=str(scratch / "ours-var"))
    elif tool == "prefect":
        env.update(PREFECT_HOME=str(scratch / "prefect-home"), PREFECT_LOGGING_LEVEL="WARNING")
    elif tool == "airflow":
        env.update(AIRFLOW_HOME=str(PEERS_DIR / "airflow" / "home"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
                   AIRFLOW__LOGGING__LOGGING_LEVEL="WARNING")
    elif tool == "dagster":
        env.update(DAGSTER_HOME=str(scratch / "dagster-home"))
        (scratch / "dagster-home").mkdir(exist_ok=True)
    return env


def one_run(tool: str, shape: str, n: int, env: dict[str, str], cwd: Path) -> dict:
    script = HERE / f"{tool}_wf.py"
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(python_for(tool)), str(script), shape, str(n)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = b""
    # read before waiting, so a chatty tool cannot fill the pipe and stall
    for chunk in iter(lambda: proc.stdout.read(65536), b""):
        out += chunk
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = out.decode(errors="replace")
    last = text.strip().splitlines()[-1] if text.strip() else ""
    done = [line.split() for line in text.splitlines() if line.startswith(f"ok {n} ")]
    if proc.returncode != 0 or not done:
        raise RuntimeError(f"{tool} {shape} {n}: exit {proc.returncode}: {last[-300:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_mb": usage.ru_maxrss / 1024,
            "workflow_s": float(done[-1][2])}


def measure(tool: str, repeat: int, scratch: Path, ours_db: str) -> dict:
    env = tool_env(tool, scratch, ours_db)
    cwd = scratch / f"{tool}-cwd"
    cwd.mkdir(exist_ok=True)
    one_run(tool, "chain", 10, env, cwd)  # warm-up: byte-code caches, first-run database setup
    out: dict = {}
    for shape in SHAPES:
        for n in SIZES:
            runs = [one_run(tool, shape, n, env, cwd) for _ in range(repeat)]
            out[f"{shape}_{n}"] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
            # the workflow's own time (start-up excluded) is the least noisy: keep the best of the runs
            out[f"{shape}_{n}"]["workflow_s"] = min(r["workflow_s"] for r in runs)
        big, small = out[f"{shape}_100"], out[f"{shape}_10"]
        out[f"{shape}_marginal_ms"] = (big["workflow_s"] - small["workflow_s"]) / 90 * 1000
        out[f"{shape}_marginal_wall_ms"] = (big["wall_s"] - small["wall_s"]) / 90 * 1000
        out[f"{shape}_marginal_cpu_ms"] = (big["cpu_s"] - small["cpu_s"]) / 90 * 1000
    return out


def migrate_ours(scratch: Path) -> str:
    url = f"sqlite:///{scratch / 'ours.sqlite3'}"
    env = tool_env("ours", scratch, url)
    subprocess.run([str(python_for("ours")), "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env,
                   check=True)
    return url


def version(tool: str) -> str:
    if tool == "ours":
        return "this repository"
    dist = {"airflow": "apache-airflow"}.get(tool, tool)
    try:
        return subprocess.run(
            [str(python_for(tool)), "-c", f"import importlib.metadata as m; print(m.version('{dist}'))"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    except Exception:
        return "?"


def table(results: dict) -> str:
    ours = results.get("ours", {})
    head = (f"{'tool':<9} {'version':<10} {'shape':<7} {'wall 10':>8} {'wall 100':>9} {'per task':>9} {'x ours':>7}"
            f" {'cpu 100':>8} {'x ours':>7} {'rss MB':>7} {'x ours':>7}")
    lines = [head, "-" * len(head)]
    for tool, res in results.items():
        if "error" in res:
            lines.append(f"{tool:<9} not run: {res['error'].splitlines()[-1][:150]}")
            continue
        for shape in SHAPES:
            big, small = res[f"{shape}_100"], res[f"{shape}_10"]
            marginal = res[f"{shape}_marginal_ms"]

            def ratio(value: float, ours_value: float | None) -> str:
                return f"{value / ours_value:.1f}" if ours_value else "-"

            o_big = ours.get(f"{shape}_100", {}) if "error" not in ours else {}
            lines.append(
                f"{tool:<9} {res['version'][:10]:<10} {shape:<7} {small['wall_s']:>7.2f}s {big['wall_s']:>8.2f}s"
                f" {marginal:>7.2f}ms {ratio(marginal, ours.get(f'{shape}_marginal_ms')):>7}"
                f" {big['cpu_s']:>7.2f}s {ratio(big['cpu_s'], o_big.get('cpu_s')):>7}"
                f" {big['maxrss_mb']:>7.0f} {ratio(big['maxrss_mb'], o_big.get('maxrss_mb')):>7}"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="runs per (shape, N); the median is kept")
    parser.add_argument("--quick", action="store_true", help="one run each")
    parser.add_argument("--only", default=",".join(TOOLS), help=f"comma-separated, from {','.join(TOOLS)}")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "peers.json"))
    args = parser.parse_args()
    tools = [t for t in args.only.split(",") if t]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        parser.error(f"--only: unknown tool {unknown[0]!r}; known: {', '.join(TOOLS)}")
    if "ours" not in tools:
        tools.insert(0, "ours")  # ratios need ours, measured in the same run
    repeat = 1 if args.quick else args.repeat
    scratch = Path(tempfile.mkdtemp(prefix="etl-peers-run-"))
    results: dict = {}
    try:
        ours_db = migrate_ours(scratch)
        for tool in tools:
            why = unavailable(tool)
            if why:
                results[tool] = {"error": why, "version": "-"}
                print(f"{tool}: {why.splitlines()[0]}", file=sys.stderr)
                continue
            print(f"{tool}: running ...", file=sys.stderr, flush=True)
            try:
                results[tool] = {"version": version(tool), **measure(tool, repeat, scratch, ours_db)}
            except Exception as exc:
                results[tool] = {"error": str(exc), "version": version(tool)}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                          "repeat": repeat, "results": results}, indent=2))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
