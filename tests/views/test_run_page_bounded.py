"""A run page stays small whatever the run holds: node records, its report and its log are bounded (issue 25)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from scheduler.models import NodeRecord, RunLogLine, RunStatus, TargetKind
from scheduler.views import logs, pages

NODES = 2000
LINES = 3000
PAGE_LIMIT = 100 * 1024


@pytest.fixture
def huge_run(make_schedule, make_run, now):
    from scheduler.pipelines import registry
    from tests.services.semantics_helpers import counting_factory

    names = [f"node_{i:04d}" for i in range(NODES)]
    registry.register_workflow("test.huge", {name: counting_factory({}) for name in names[:3]},
                               [(names[0], names[1])], replace=True)
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.huge")
    report = {"records": [{"task_id": n, "outcome": "SUCCESS" if i % 50 else "FAILED", "rows": i,
                           "reason": "" if i % 50 else "RuntimeError: source down"} for i, n in enumerate(names)]}
    run = make_run(schedule, RunStatus.FAILED, report=report)
    NodeRecord.objects.bulk_create([
        NodeRecord(run=run, task_id=n, outcome="SUCCESS" if i % 50 else "FAILED", attempts=1,
                   started_at=now + timedelta(seconds=i), finished_at=now + timedelta(seconds=i + 1), rows=i,
                   reason="" if i % 50 else "RuntimeError: source down",
                   error="" if i % 50 else "Traceback (most recent call last):\n" + "  frame\n" * 1000)
        for i, n in enumerate(names)])
    RunLogLine.objects.bulk_create([
        RunLogLine(run=run, seq=i + 1, at=now, level="INFO", source="pipeline", node=names[i % 20],
                   message=f"loaded batch {i} of the orders table into the warehouse")
        for i in range(LINES)])
    yield run
    registry._workflows.pop("test.huge", None)


def test_a_huge_workflow_run_page_is_bounded(viewer_client, huge_run):
    response = viewer_client.get(reverse("scheduler:run_detail", args=[huge_run.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert len(response.content) <= PAGE_LIMIT, f"{len(response.content):,} bytes"
    assert page.count("<tr data-node=") == pages.RUN_PAGE_NODES
    assert page.count('class="gantt-row"') <= pages.RUN_PAGE_NODES
    assert page.count("<li class=\"l-") == logs.RUN_PAGE_LOG_LINES
    assert page.count("<option") == 0 and 'name="node"' in page  # 2,000 nodes: the filter asks for a name
    # the failed nodes come first, and the page says how many it leaves out
    assert 'data-node="node_0000"' in page and 'data-node="node_0050"' in page
    assert f"{NODES:,} node records" in page
    assert "Next lines" in page


def test_the_next_lines_of_a_long_log_come_a_bounded_page_at_a_time(viewer_client, huge_run):
    url = reverse("scheduler:run_log", args=[huge_run.pk])
    response = viewer_client.get(url, {"after": logs.RUN_PAGE_LOG_LINES}, headers={"HX-Request": "true"})
    page = response.content.decode()
    assert page.count("<li class=\"l-") == logs.RUN_PAGE_LOG_LINES
    assert f'data-seq="{logs.RUN_PAGE_LOG_LINES + 1}"' in page and "Next lines" in page
    node = viewer_client.get(reverse("scheduler:run_detail", args=[huge_run.pk]), {"node": "node_0007"})
    assert node.context["node_error"] == "" and 'data-node="node_0007"' in node.content.decode()
    wrong = viewer_client.get(reverse("scheduler:run_detail", args=[huge_run.pk]), {"node": "nope"})
    assert wrong.context["node_error"].startswith("node: no node named 'nope'")
    last = viewer_client.get(url, {"after": LINES - 10}, headers={"HX-Request": "true"}).content.decode()
    assert last.count("<li class=\"l-") == 10 and "Next lines" not in last
    whole = viewer_client.get(url).content.decode()  # as text: the whole log
    assert whole.count("\n") == LINES


def test_long_lines_fill_the_page_by_characters_not_only_by_count(viewer_client, huge_run):
    RunLogLine.objects.filter(run=huge_run, seq__lte=50).update(message="x" * 16_000)
    response = viewer_client.get(reverse("scheduler:run_detail", args=[huge_run.pk]))
    assert len(response.content) <= PAGE_LIMIT, f"{len(response.content):,} bytes"
    assert 1 <= response.content.decode().count("<li class=\"l-") <= logs.RUN_PAGE_LOG_CHARS // 16_000 + 1


def test_a_running_runs_follower_catches_up_a_bounded_answer_at_a_time(viewer_client, huge_run):
    from scheduler.models import Run

    Run.objects.filter(pk=huge_run.pk).update(status=RunStatus.RUNNING, finished_at=None)
    url = reverse("scheduler:run_log", args=[huge_run.pk])
    behind = viewer_client.get(url, {"after": 0}, headers={"HX-Request": "true"}).content.decode()
    assert behind.count("<li class=\"l-") == logs.RUN_PAGE_LOG_LINES
    assert 'hx-trigger="load, every 2s' in behind  # more lines wait: the next answer is asked for at once
    caught_up = viewer_client.get(url, {"after": LINES}, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 2s' in caught_up
