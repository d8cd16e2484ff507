"""Scenario 5: topological order + failure gating in the pure core, 100,000 nodes.

No Django, no database: `topological_order` then `gate` with the first node
failed (so the verdict must reach every node), on three shapes: a chain, a
fan-out (one root, N-1 leaves) and a layered DAG (each node depends on two of
the previous layer). Linear means seconds per node stay flat from 10k to 100k.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import Result, emit, maybe_profile, median, scenario_args, timed  # noqa: E402

TITLE = "topological order + failure gating, pure core"
SIZES = {"nodes": 100_000}


def graph(shape: str, n: int) -> tuple[list[str], list[tuple[str, str]]]:
    nodes = [f"n{i}" for i in range(n)]
    if shape == "chain":
        edges = [(nodes[i - 1], nodes[i]) for i in range(1, n)]
    elif shape == "fanout":
        edges = [(nodes[0], nodes[i]) for i in range(1, n)]
    else:  # layered: width 100, each node depends on two nodes of the layer before
        width = 100
        edges = []
        for i in range(width, n):
            base = (i // width - 1) * width
            edges.append((nodes[base + i % width], nodes[i]))
            edges.append((nodes[base + (i + 1) % width], nodes[i]))
    return nodes, edges


def topo_and_gate(nodes: list[str], edges: list[tuple[str, str]], failed: set[str]) -> int:
    from scheduler.core import gate, topological_order

    order = topological_order(nodes, edges)
    upstreams: dict[str, list[str]] = {}
    for a, b in edges:
        upstreams.setdefault(b, []).append(a)
    blocked = gate(order, upstreams, failed)
    return len(blocked)


def run(nodes: int = 100_000, repeat: int = 3, profile: bool = False) -> Result:
    result = Result(5, TITLE)
    small = max(10, nodes // 10)
    worst = 0.0
    for shape in ("chain", "fanout", "layered"):
        per_node = {}
        for n in (small, nodes):
            g = graph(shape, n)
            # fail the roots so the verdict has to reach every other node
            failed = set(g[0][:100]) if shape == "layered" else {g[0][0]}
            times, blocked = timed(lambda: topo_and_gate(*g, failed), repeat)
            if profile and n == nodes and shape == "layered":
                with maybe_profile(f"s5-{shape}-{n}", True):  # an extra, untimed call
                    topo_and_gate(*g, failed)
            t = median(times)
            assert blocked == n - len(failed), (
                f"{shape}: every node below the failed root must be blocked, got {blocked}"
            )
            per_node[n] = t / n
            result.details[f"{shape}_{n}_s"] = t
        t_big = result.details[f"{shape}_{nodes}_s"]
        worst = max(worst, t_big)
        growth = per_node[nodes] / per_node[small]
        result.add(f"{shape}, {nodes:,} nodes", t_big, "s", "<= 1 s", t_big <= 1.0)
        result.add(f"{shape}: per-node cost {nodes:,} vs {small:,} (1.0 = linear)", growth, "x", "linear",
                   growth < 2.0)
    result.details["worst_s"] = worst
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    nodes = args.nodes or (10_000 if args.quick else SIZES["nodes"])
    emit(run(nodes=nodes, profile=args.profile), args.out)


if __name__ == "__main__":
    main()
