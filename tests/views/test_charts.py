"""The SVG layouts are pure functions: no database, no rendering."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

from scheduler.views.charts import Node, history_chart, layered_layout, report_nodes


def test_a_node_sits_one_layer_right_of_its_furthest_upstream():
    nodes = [Node(key=k, label=k) for k in "abcd"]
    layout = layered_layout(nodes, [("a", "b"), ("b", "c"), ("a", "c"), ("a", "d")])
    assert {n.key: n.layer for n in layout.nodes} == {"a": 0, "b": 1, "c": 2, "d": 1}
    assert layout.cycle is None and len(layout.edges) == 4
    assert layout.width > 3 * nodes[0].w


def test_a_stored_cycle_is_reported_not_raised():
    nodes = [Node(key=k, label=k) for k in "ab"]
    layout = layered_layout(nodes, [("a", "b"), ("b", "a")])
    assert set(layout.cycle) == {"a", "b"} and all(e.cyclic for e in layout.edges)


def test_the_history_chart_scales_bars_to_the_longest_run_and_rows_to_the_most_rows():
    t = datetime(2026, 3, 1, tzinfo=timezone.utc)
    runs = [
        SimpleNamespace(pk=i, status="SUCCEEDED", started_at=t, finished_at=t + timedelta(seconds=s), rows_loaded=r)
        for i, (s, r) in enumerate([(10, 100), (20, 50)])
    ]
    chart = history_chart(runs, height=120)
    assert chart.max_seconds == 20 and chart.max_rows == 100
    assert chart.bars[1].h == chart.plot_bottom - chart.plot_top
    assert chart.bars[0].h == chart.bars[1].h / 2


def test_the_report_lists_records_skipped_and_blocked_nodes():
    rows, layout = report_nodes(
        {"records": [{"task_id": "a", "outcome": "SUCCESS", "rows": 3}], "skipped": ["b"], "blocked": ["c"]},
        [("a", "c")],
    )
    assert [(r["task"], r["outcome"]) for r in rows] == [("a", "SUCCEEDED"), ("b", "SKIPPED"), ("c", "BLOCKED")]
    assert {n.key: n.layer for n in layout.nodes} == {"a": 0, "b": 0, "c": 1}
