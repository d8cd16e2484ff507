"""The run page of a workflow or dbt run: log lines by node, the failed node's traceback, a Gantt strip of its nodes
(issue 23, point 4)."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from django.urls import reverse

from scheduler.models import NodeRecord, RunLogLine, RunStatus, TargetKind
from scheduler.views.charts import node_gantt, node_label

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def wf_run(make_schedule, make_run, now):
    from scheduler.pipelines import registry
    from tests.services.semantics_helpers import counting_factory

    registry.register_workflow("test.pair", {"a": counting_factory({}), "b": counting_factory({})}, [("a", "b")],
                               replace=True)
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.pair")
    run = make_run(schedule, RunStatus.FAILED)
    NodeRecord.objects.create(run=run, task_id="a", outcome="SUCCESS", started_at=now, rows=10,
                              finished_at=now + timedelta(seconds=30))
    NodeRecord.objects.create(run=run, task_id="b", outcome="FAILED", started_at=now + timedelta(seconds=30),
                              finished_at=now + timedelta(seconds=40), reason="RuntimeError: source down",
                              error='Traceback (most recent call last):\n  File "b.py", line 3\n'
                                    'RuntimeError: source down')
    for seq, (node, message) in enumerate([("", "started on w1"), ("a", "reading a"), ("b", "reading b"),
                                           ("b", "node failed"), ("", "finished FAILED")], start=1):
        RunLogLine.objects.create(run=run, seq=seq, at=now, level="INFO", source="scheduler", message=message,
                                  node=node)
    yield run
    registry._workflows.pop("test.pair", None)


def _messages(page: str) -> list[str]:
    return re.findall(r'<span class="msg">([^<]*)</span>', page)


def test_every_log_line_shows_its_node_and_the_filter_keeps_one_nodes_lines(viewer_client, wf_run):
    url = reverse("scheduler:run_detail", args=[wf_run.pk])
    page = viewer_client.get(url).content.decode()
    assert 'data-node="a"' in page and '<span class="node">b</span>' in page
    assert _messages(page) == ["started on w1", "reading a", "reading b", "node failed", "finished FAILED"]
    assert '<option value="b"' in page  # the node filter offers the run's nodes
    filtered = viewer_client.get(url, {"node": "b"}).content.decode()
    assert _messages(filtered) == ["reading b", "node failed"]
    assert "node=b" in filtered  # the follower asks for the same node's new lines


def test_the_follower_and_the_text_log_keep_the_node_filter(viewer_client, wf_run):
    url = reverse("scheduler:run_log", args=[wf_run.pk])
    more = viewer_client.get(url, {"after": 1, "node": "a"}, HTTP_HX_REQUEST="true").content.decode()
    assert _messages(more) == ["reading a"]
    text = viewer_client.get(url, {"node": "b"}).content.decode()
    assert "reading b" in text and "reading a" not in text and "scheduler [b]: node failed" in text


def test_an_unknown_node_filter_says_so_and_shows_no_line(viewer_client, wf_run):
    page = viewer_client.get(reverse("scheduler:run_detail", args=[wf_run.pk]), {"node": "zzz"}).content.decode()
    assert "node: no node named" in page and _messages(page) == []


def test_the_failed_nodes_row_shows_its_error_and_traceback(viewer_client, wf_run):
    page = viewer_client.get(reverse("scheduler:run_detail", args=[wf_run.pk])).content.decode()
    row = page[page.index('<tr data-node="b"'):]
    row = row[:row.index("</tr>")]
    assert "RuntimeError: source down" in row and "Traceback (most recent call last)" in row


def test_the_run_page_draws_a_bar_per_node_in_time(viewer_client, wf_run):
    page = viewer_client.get(reverse("scheduler:run_detail", args=[wf_run.pk])).content.decode()
    assert 'id="node-gantt"' in page
    bars = re.findall(r'<rect class="gantt-bar g-(\w+)" data-node="([^"]+)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"',
                      page)
    assert [(status, node) for status, node, _, _ in bars] == [("succeeded", "a"), ("failed", "b")]
    (_, _, xa, wa), (_, _, xb, wb) = bars
    assert float(xb) == pytest.approx(float(xa) + float(wa), abs=0.2)  # b starts when a ends
    assert float(wa) == pytest.approx(3 * float(wb), rel=0.02)  # 30 s against 10 s


def _dbt_records():
    """Node records shaped like dbt's: unique ids, seeds, models and tests, each with its own times."""
    ids = ["seed.shop.raw_orders", "model.shop.stg_orders", "model.shop.orders",
           "test.shop.not_null_orders_id.5b1c2f", "test.shop.unique_orders_id.8e0a1d"]
    out = []
    for i, unique_id in enumerate(ids):
        start = T0 + timedelta(seconds=4 * i)
        out.append(SimpleNamespace(task_id=unique_id, outcome="FAILED" if "unique" in unique_id else "SUCCESS",
                                   started_at=start, finished_at=start + timedelta(seconds=3), run_attempt=1,
                                   resumed=False, reason=""))
    return out


def test_the_strip_draws_dbt_models_and_tests_over_the_runs_span():
    strip = node_gantt(_dbt_records(), plot_w=400, label_w=200)
    assert [b.node for b in strip.bars] == [r.task_id for r in _dbt_records()]
    assert strip.bars[0].x == 200 and strip.bars[-1].x + strip.bars[-1].w == pytest.approx(600, abs=0.2)
    assert strip.bars[-1].status == "failed" and strip.bars[1].label == "model stg_orders"
    assert strip.span_seconds == 19


def test_a_dbt_node_is_labelled_as_dbts_log_names_it():
    assert node_label("model.shop.orders") == "model orders"
    assert node_label("unit_test.shop.orders.test_totals") == "unit_test orders::test_totals"  # not "unit_test orders"
    assert node_label("extract") == "extract"


def test_a_dbt_run_page_draws_its_node_records(viewer_client, make_schedule, make_run):
    schedule = make_schedule("shop", target_kind=TargetKind.DBT, target_id="",
                             dbt={"project_dir": "/srv/dbt/shop"})
    run = make_run(schedule, RunStatus.FAILED)
    for r in _dbt_records():
        NodeRecord.objects.create(run=run, task_id=r.task_id, outcome=r.outcome, started_at=r.started_at,
                                  finished_at=r.finished_at)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    assert page.count('class="gantt-bar ') == 5 and 'data-node="test.shop.unique_orders_id.8e0a1d"' in page


def test_a_long_dbt_run_draws_a_bounded_strip_and_says_how_many_it_left_out():
    records = [SimpleNamespace(task_id=f"model.p.m{i}", outcome="SUCCESS", started_at=T0 + timedelta(seconds=i),
                               finished_at=T0 + timedelta(seconds=i + 1), run_attempt=1, resumed=False, reason="")
               for i in range(500)]
    strip = node_gantt(records, max_rows=200)
    assert len(strip.bars) == 200 and strip.left_out == 300
