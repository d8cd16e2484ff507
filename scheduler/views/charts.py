"""Layouts for the small inline SVG pictures: pure functions, coordinates only.

The templates draw the shapes; these functions only decide where they go, so
they can be tested without rendering anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Iterable

from scheduler.core import CycleError, topological_order
from scheduler.core.dbt_results import node_name

NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 170, 34, 60, 18, 10


@dataclass
class Node:
    key: Hashable
    label: str
    status: str = ""
    href: str = ""
    layer: int = 0
    x: float = 0
    y: float = 0
    w: float = NODE_W
    h: float = NODE_H

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2


@dataclass
class Edge:
    path: str
    cyclic: bool = False


@dataclass
class Layout:
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    width: float = 0
    height: float = 0
    cycle: list | None = None


def layered_layout(nodes: list[Node], edges: Iterable[tuple[Hashable, Hashable]]) -> Layout:
    """Left-to-right layers: a node sits one layer right of its furthest upstream.

    `edges` are (upstream, downstream). A cycle (which the services refuse, but
    old data may hold) puts every node in layer 0 and is reported, not raised.
    """
    by_key = {n.key: n for n in nodes}
    edges = [(a, b) for a, b in edges if a in by_key and b in by_key]
    keys = [str(n.key) for n in nodes]
    str_to_node = {str(n.key): n for n in nodes}
    cycle = None
    try:
        order = topological_order(keys, [(str(a), str(b)) for a, b in edges])
    except CycleError as exc:
        order, cycle = keys, list(getattr(exc, "cycle", []) or [])
    ups: dict[str, list[str]] = {k: [] for k in keys}
    for a, b in edges:
        ups[str(b)].append(str(a))
    if cycle is None:
        for key in order:
            node = str_to_node[key]
            node.layer = max((str_to_node[u].layer + 1 for u in ups[key]), default=0)
    columns: dict[int, list[Node]] = {}
    for key in order:
        columns.setdefault(str_to_node[key].layer, []).append(str_to_node[key])
    for layer, members in columns.items():
        for row, node in enumerate(members):
            node.x = PAD + layer * (NODE_W + GAP_X)
            node.y = PAD + row * (NODE_H + GAP_Y)
    layout = Layout(nodes=[str_to_node[k] for k in order], cycle=cycle)
    for a, b in edges:
        up, down = by_key[a], by_key[b]
        x1, y1, x2, y2 = up.x + up.w, up.cy, down.x, down.cy
        if x2 <= x1:  # same layer (only with a cycle): bend around
            layout.edges.append(
                Edge(f"M{x1:.0f},{y1:.0f} C{x1 + 40:.0f},{y1:.0f} {x2 - 40:.0f},{y2:.0f} {x2:.0f},{y2:.0f}", True)
            )
            continue
        mid = (x1 + x2) / 2
        layout.edges.append(Edge(f"M{x1:.0f},{y1:.0f} C{mid:.0f},{y1:.0f} {mid:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"))
    layout.width = max((n.x + n.w for n in nodes), default=0) + PAD
    layout.height = max((n.y + n.h for n in nodes), default=0) + PAD
    return layout


@dataclass
class Bar:
    x: float
    y: float
    w: float
    h: float
    status: str
    title: str
    href: str = ""


@dataclass
class HistoryChart:
    width: int
    height: int
    bars: list[Bar]
    rows_points: str
    max_seconds: float
    max_rows: int
    plot_top: int
    plot_bottom: int


def history_chart(runs: list, *, width: int = 640, height: int = 180, href=lambda run: "") -> HistoryChart:
    """Bars for duration (left scale) and a line for rows loaded (right scale), oldest on the left."""
    top, bottom = 14, height - 18
    plot_h = bottom - top
    durations = []
    for run in runs:
        seconds = 0.0
        if run.started_at and run.finished_at:
            seconds = max((run.finished_at - run.started_at).total_seconds(), 0.0)
        durations.append(seconds)
    max_seconds = max(durations, default=0) or 1.0
    max_rows = max((r.rows_loaded or 0 for r in runs), default=0) or 1
    # a few runs should not become a few giant bars
    step = min((width - 2 * PAD) / max(len(runs), 1), 40)
    bars, points = [], []
    for i, (run, seconds) in enumerate(zip(runs, durations)):
        h = max(plot_h * seconds / max_seconds, 1.5)
        x = PAD + i * step
        bars.append(
            Bar(
                x=round(x + step * 0.1, 1),
                y=round(bottom - h, 1),
                w=round(max(step * 0.8, 1), 1),
                h=round(h, 1),
                status=str(run.status).lower(),
                title=f"run {run.pk}: {seconds:.1f} s, {run.rows_loaded if run.rows_loaded is not None else '-'} rows",
                href=href(run),
            )
        )
        ry = bottom - plot_h * (run.rows_loaded or 0) / max_rows
        points.append(f"{x + step / 2:.1f},{ry:.1f}")
    return HistoryChart(
        width=width,
        height=height,
        bars=bars,
        rows_points=" ".join(points),
        max_seconds=round(max_seconds, 1),
        max_rows=max_rows,
        plot_top=top,
        plot_bottom=bottom,
    )


def report_size(report: dict) -> int:
    """How many nodes the report names (records, then skipped and blocked ones)."""
    return sum(len(report.get(key, []) or []) for key in ("records", "skipped", "blocked"))


def report_nodes(report: dict, deps: Iterable[tuple[str, str]] = (), *, limit: int | None = None
                 ) -> tuple[list[dict], Layout]:
    """Rows for the workflow report table and a layout of its nodes coloured by outcome.

    With `limit`, at most that many rows, those that did not succeed first (a dbt build can name thousands)."""
    rows: list[dict] = []
    for record in report.get("records", []) or []:
        outcome = str(record.get("outcome", "")).upper()
        rows.append(
            {
                "task": record.get("task_id", "?"),
                "outcome": "SUCCEEDED" if outcome == "SUCCESS" else outcome or "?",
                "rows": record.get("rows"),
                "reason": record.get("reason", ""),
                "started_at": record.get("started_at"),
                "finished_at": record.get("finished_at"),
            }
        )
    recorded = {r["task"] for r in rows}
    for task in report.get("skipped", []) or []:
        if task not in recorded:
            rows.append({"task": task, "outcome": "SKIPPED", "rows": None, "reason": "still fresh"})
    for task in report.get("blocked", []) or []:
        rows.append({"task": task, "outcome": "BLOCKED", "rows": None, "reason": "an upstream node failed"})
    if limit is not None and len(rows) > limit:
        rows = ([r for r in rows if r["outcome"] != "SUCCEEDED"]
                + [r for r in rows if r["outcome"] == "SUCCEEDED"])[:limit]
    nodes = [Node(key=r["task"], label=r["task"], status=r["outcome"].lower()) for r in rows]
    return rows, layered_layout(nodes, list(deps))


# --- a run's nodes in time (workflow nodes, dbt models and tests) -----------

GANTT_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
DBT_KINDS = {"model", "seed", "snapshot", "test", "unit_test", "source", "analysis", "operation", "exposure"}
GANTT_STATUS = {"SUCCESS": "succeeded", "FAILED": "failed", "SKIPPED": "skipped"}


@dataclass
class GanttBar:
    node: str
    label: str
    status: str
    x: float
    y: float
    w: float
    title: str


@dataclass
class Gantt:
    bars: list[GanttBar]
    ticks: list[tuple[float, str]]
    width: float
    height: float
    label_w: float
    plot_w: float
    row_h: float
    span_seconds: float
    left_out: int = 0
    resumed: int = 0


def node_label(task_id: str) -> str:
    """A node's short name as dbt's log writes it: a dbt unique id `model.shop.orders` is "model orders", a unit
    test's "unit_test orders::test_totals"; a workflow node is itself."""
    parts = task_id.split(".")
    if len(parts) >= 3 and parts[0] in DBT_KINDS:
        return f"{parts[0]} {node_name(task_id)}"
    return task_id


def _offset(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} s"
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


GANTT_MIN_BAR_PX = 6.0  # a node that failed in 40 ms is still a bar a person sees (and can point at)


def node_gantt(records: Iterable, *, plot_w: int = 640, label_w: int = 210, row_h: int = 24,
               max_rows: int = 300) -> Gantt:
    """One row per node record that ran in this run (in the order they started): a bar from its start to its end.

    The x axis is the run's own span, from the first node's start to the last one's end. A resumed node (it
    succeeded in an earlier attempt) did not run here and is only counted. Past `max_rows` rows the rest are
    counted in `left_out`, so a dbt project of thousands of nodes keeps the page small.
    """
    records = list(records)
    ran = [r for r in records if not getattr(r, "resumed", False)]
    resumed = len(records) - len(ran)
    ran.sort(key=lambda r: (r.started_at, r.finished_at))
    drawn, left_out = ran[:max_rows], max(len(ran) - max_rows, 0)
    if not ran:
        return Gantt([], [], label_w + plot_w, 0, label_w, plot_w, row_h, 0, 0, resumed)
    start = min(r.started_at for r in ran)
    end = max(max(r.finished_at for r in ran), start)
    span = (end - start).total_seconds()
    scale = plot_w / span if span > 0 else 0.0
    top = 18
    attempts = len({getattr(r, "run_attempt", 1) for r in ran}) > 1
    bars = []
    for i, r in enumerate(drawn):
        begin = (r.started_at - start).total_seconds()
        took = max((r.finished_at - r.started_at).total_seconds(), 0.0)
        status = GANTT_STATUS.get(str(r.outcome).upper(), str(r.outcome).lower())
        label = node_label(r.task_id) + (f" (attempt {r.run_attempt})" if attempts else "")
        title = f"{r.task_id}: {status}, {took:.1f} s from +{begin:.1f} s"
        if getattr(r, "reason", ""):
            title += f": {r.reason}"
        bars.append(GanttBar(r.task_id, label, status, round(label_w + begin * scale, 1), top + i * row_h,
                             round(max(took * scale, GANTT_MIN_BAR_PX) if span > 0 else plot_w, 1), title))
    step = next((s for s in GANTT_STEPS if span / s <= 8), GANTT_STEPS[-1])
    ticks, t = [], 0
    while t <= span and span > 0:
        ticks.append((round(label_w + t * scale, 1), _offset(t)))
        t += step
    height = top + len(bars) * row_h + 22  # room under the rows for the axis line and its caption
    return Gantt(bars, ticks, label_w + plot_w + 10, height, label_w, plot_w, row_h, span, left_out, resumed)
