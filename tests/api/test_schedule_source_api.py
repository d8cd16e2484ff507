"""/api/v1/schedules and schedules as code: managed_by shown, edits refused (409) until detached, safe deletes."""
from __future__ import annotations

import pytest

from scheduler.models import AuditEntry, Run, RunStatus, Schedule
from scheduler.services.definitions.schedule_files import schedules_apply
from tests.api.conftest import problem_of

pytestmark = pytest.mark.django_db

FILE = """\
version: 1
schedules:
  - name: orders_sync
    target_id: demo.noop
    trigger_kind: manual
    priority: 6
"""


@pytest.fixture
def managed(standard_class, now):
    schedules_apply(text=FILE, actor="user:ci", source="schedules.yaml", now=now)
    return Schedule.objects.get(name="orders_sync")


def test_a_managed_schedule_shows_its_file_in_get_and_list(api, admin_token, managed, now):
    body = api.get("/schedules/orders_sync", token=admin_token).json()
    assert body["managed_by"]["file"] == "schedules.yaml" and body["managed_by"]["applied_by"] == "ci"
    assert body["managed_by"]["digest"] == managed.source_digest and body["deleting"] is False
    listed = api.get("/schedules", token=admin_token).json()["items"]
    assert [item["managed_by"]["file"] for item in listed] == ["schedules.yaml"]


def test_a_patch_of_a_managed_field_answers_409_naming_the_field_and_changes_nothing(api, admin_token, managed):
    body = problem_of(api.patch("/schedules/orders_sync", {"priority": 9}, token=admin_token), 409)
    assert body["errors"] == [{"field": "priority", "message": body["errors"][0]["message"]}]
    assert body["errors"][0]["message"].startswith("is managed by schedules.yaml")
    assert Schedule.objects.get(pk=managed.pk).priority == 6
    # pausing is an operation: allowed
    assert api.patch("/schedules/orders_sync", {"enabled": False}, token=admin_token).status_code == 200


def test_detach_then_the_patch_goes_through(api, admin_token, managed):
    detached = api.post("/schedules/orders_sync/detach", {"reason": "hotfix"}, token=admin_token)
    assert detached.status_code == 200 and detached.json()["managed_by"] is None
    assert AuditEntry.objects.get(action="schedule.detach").reason == "hotfix"
    assert api.patch("/schedules/orders_sync", {"priority": 9}, token=admin_token).json()["spec"]["priority"] == 9
    again = problem_of(api.post("/schedules/orders_sync/detach", {}, token=admin_token), 409)
    assert "is not managed by a schedules file" in again["detail"]


def test_detach_with_bad_input_or_without_rights(api, admin_token, op_token, managed):
    problem_of(api.post("/schedules/orders_sync/detach", {"reason": 5}, token=admin_token), 422)
    problem_of(api.post("/schedules/orders_sync/detach", {"why": "x"}, token=admin_token), 422)
    problem_of(api.post("/schedules/orders_sync/detach", {}, token=op_token), 403)
    problem_of(api.post("/schedules/nope/detach", {}, token=admin_token), 404)
    assert Schedule.objects.get(pk=managed.pk).source_file == "schedules.yaml"


def test_a_delete_with_unfinished_runs_answers_409_with_their_ids(api, admin_token, make_schedule, make_run, now):
    schedule = make_schedule("orders")
    queued = make_run(schedule, RunStatus.QUEUED)
    running = make_run(schedule, RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    body = problem_of(api.delete("/schedules/orders", token=admin_token), 409)
    assert body["run_ids"] == [queued.pk, running.pk]
    assert f"{queued.pk} (QUEUED), {running.pk} (RUNNING)" in body["detail"]
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    problem_of(api.delete("/schedules/orders?stop_runs=maybe", token=admin_token), 422)

    deleting = api.delete("/schedules/orders?stop_runs=true&reason=retired", token=admin_token)
    assert deleting.status_code == 202 and deleting.json() == {"status": "deleting", "stopping_runs": [running.pk]}
    assert Run.objects.get(pk=queued.pk).status == RunStatus.CANCELLED
    shown = api.get("/schedules/orders", token=admin_token).json()
    assert shown["deleting"] is True and shown["enabled"] is False


def test_a_delete_with_stop_runs_and_nothing_running_answers_204(api, admin_token, make_schedule, make_run):
    schedule = make_schedule("orders")
    make_run(schedule, RunStatus.QUEUED)
    assert api.delete("/schedules/orders?stop_runs=true", token=admin_token).status_code == 204
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
