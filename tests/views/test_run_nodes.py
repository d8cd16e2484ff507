"""The run page shows each workflow node's record and tries, and offers "Re-run from failure"."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from scheduler.models import NodeRecord, Run, RunStatus, TargetKind, TriggerKind


@pytest.fixture
def failed_run(make_schedule, make_run, now):
    from scheduler.pipelines import registry
    from tests.services.semantics_helpers import counting_factory

    registry.register_workflow("test.pair", {"a": counting_factory({}), "b": counting_factory({})}, [("a", "b")],
                               replace=True)
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="test.pair")
    run = make_run(schedule, RunStatus.FAILED)
    NodeRecord.objects.create(run=run, task_id="a", outcome="SUCCESS", attempts=1, started_at=now, finished_at=now,
                              rows=10)
    NodeRecord.objects.create(run=run, task_id="b", outcome="FAILED", attempts=3, started_at=now,
                              finished_at=now + timedelta(seconds=5), reason="RuntimeError: source down")
    yield run
    registry._workflows.pop("test.pair", None)


def test_the_run_page_lists_each_node_with_its_tries(viewer_client, failed_run):
    response = viewer_client.get(reverse("scheduler:run_detail", args=[failed_run.pk]))
    page = response.content.decode()
    assert [(n.task_id, n.attempts) for n in response.context["nodes"]] == [("a", 1), ("b", 3)]
    assert 'data-node="b"' in page and "RuntimeError: source down" in page
    assert "Re-run from failure" not in page  # a viewer may not trigger


def test_an_operator_reruns_from_failure_and_lands_on_the_new_run(operator_client, failed_run):
    page = operator_client.get(reverse("scheduler:run_detail", args=[failed_run.pk])).content.decode()
    assert "Re-run from failure" in page
    response = operator_client.post(reverse("scheduler:run_rerun_failed", args=[failed_run.pk]), {"reason": "fixed"})
    new = Run.objects.get(retry_of=failed_run)
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:run_detail", args=[new.pk])
    assert new.trigger_kind == TriggerKind.RETRY and new.status == RunStatus.QUEUED


def test_a_viewer_cannot_rerun_and_nothing_is_queued(viewer_client, failed_run):
    response = viewer_client.post(reverse("scheduler:run_rerun_failed", args=[failed_run.pk]))
    assert response.status_code == 403 and not Run.objects.filter(retry_of=failed_run).exists()


def test_a_run_that_cannot_resume_says_why_and_queues_nothing(operator_client, failed_run):
    Run.objects.filter(pk=failed_run.pk).update(status=RunStatus.SUCCEEDED)
    response = operator_client.post(reverse("scheduler:run_rerun_failed", args=[failed_run.pk]), follow=True)
    assert "run: run" in response.content.decode() and "only a FAILED or CANCELLED" in response.content.decode()
    assert not Run.objects.filter(retry_of=failed_run).exists()
