"""Print the markdown tables of docs/benchmarks.md from bench/results/latest.json and peers.json.

    .venv/bin/python bench/report.py > /tmp/tables.md
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import RESULTS, fmt  # noqa: E402
from bench.samples import measured, spread  # noqa: E402


def _samples(n: int) -> str:
    return "1 sample" if n == 1 else f"{n} samples"


def suite(path: Path) -> str:
    data = json.loads(path.read_text())
    m = data["machine"]
    carried = sorted({measured(r) for r in data["results"] if r.get("carried_over")})
    out = [
        (f"Run {data['when']}{' (quick sizes)' if data['quick'] else ''}, {_samples(data.get('samples', 1))} per "
         f"scenario (each a fresh process and scratch database); every value is the median of its samples, "
         f"with the spread (min-max, n). {data['total_s'] / 60:.1f} min for all scenarios. "
         f"Machine: {m['nproc']} cores ({m['cpu']}), {(m['memory'] or ['?'])[0].split()[1]} memory; "
         f"Python {m['python']}, Django {m['django']}, django-q2 {m['django_q2']}, SQLite {m['sqlite']}, "
         f"PostgreSQL {m['postgresql']}, Redis {''.join(m['redis'])}."
         + (f" Rows not measured in this run are marked as carried over, with the date they were measured "
            f"({'; '.join(c.removeprefix('carried over from ') for c in carried)})." if carried else "")),
        "",
        "| # | db | figure | value | spread | target | met | measured |",
        "|---|---|---|---:|---|---|---|---|",
    ]
    for res in data["results"]:
        when = measured(res)
        if res.get("error"):
            out.append(f"| {res['scenario']} | {res['db']} | {res['title']}: **did not run**: {res['error']} "
                       f"| | | | | {when} |")
            continue
        for row in res["rows"]:
            value = f"{fmt(row['value'], row['unit'])} {row['unit']}" if row["value"] is not None else row["unit"]
            met = {True: "yes", False: "**no**", None: ""}[row["met"]]
            out.append(f"| {res['scenario']} | {row['db']} | {row['figure'].strip()} | {value} | {spread(row, fmt)} "
                       f"| {row['target']} | {met} | {when} |")
    return "\n".join(out)


def peers(path: Path) -> str:
    data = json.loads(path.read_text())
    results = data["results"]
    ours = results.get("ours", {})
    out = [
        f"Run {data['when']}, {data['repeat']} fresh processes per cell (median; workflow time: best).",
        "",
        "| tool | version | shape | process wall N=10 | process wall N=100 | x ours | per task | x ours"
        " | per task (process wall) | CPU N=100 | x ours | peak RSS N=100 | x ours |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def ratio(value: float, base: float | None) -> str:
        return f"{value / base:.1f}" if base and base > 0 and value > 0 else "-"

    for tool, res in results.items():
        if "error" in res:
            out.append(f"| {tool} | {res.get('version', '-')} | not run: {res['error'].splitlines()[-1][:200]} |"
                       " | | | | | | | | | |")
            continue
        for shape in ("chain", "fanout"):
            big, small = res[f"{shape}_100"], res[f"{shape}_10"]
            o_big = ours.get(f"{shape}_100", {})
            marginal = res[f"{shape}_marginal_ms"]
            out.append(
                f"| {tool} | {res['version']} | {shape} | {small['wall_s']:.2f} s | {big['wall_s']:.2f} s |"
                f" {ratio(big['wall_s'], o_big.get('wall_s'))} |"
                f" {marginal:.2f} ms | {ratio(marginal, ours.get(f'{shape}_marginal_ms'))} |"
                f" {res[f'{shape}_marginal_wall_ms']:.2f} ms | {big['cpu_s']:.2f} s |"
                f" {ratio(big['cpu_s'], o_big.get('cpu_s'))} | {big['maxrss_mb']:.0f} MB |"
                f" {ratio(big['maxrss_mb'], o_big.get('maxrss_mb'))} |"
            )
    return "\n".join(out)


if __name__ == "__main__":
    if (RESULTS / "latest.json").exists():
        print(suite(RESULTS / "latest.json"))
    if (RESULTS / "peers.json").exists():
        print()
        print(peers(RESULTS / "peers.json"))
