"""The admin and schedules as code: "managed by" shown, edits refused until detached; deletes and unfinished runs."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from scheduler.models import AuditEntry, Run, RunStatus, Schedule
from scheduler.services.definitions.schedule_files import schedules_apply
from tests.views.test_admin import _form, admin_client  # noqa: F401  (the admin's client and form, shared)

pytestmark = pytest.mark.django_db
LIST = reverse("admin:scheduler_schedule_changelist")
FILE = "version: 1\nschedules:\n  - {name: orders, target_id: demo.noop, trigger_kind: manual}\n"


@pytest.fixture
def managed(standard_class):
    schedules_apply(text=FILE, actor="user:ci", source="schedules.yaml")
    return Schedule.objects.get(name="orders")


def _posted(standard_class, **overrides) -> dict:
    """The form as a browser posts it: the JSON boxes of other targets hold {}."""
    return _form(standard_class, command={}, dbt={}, **overrides)


def _change(schedule) -> str:
    return reverse("admin:scheduler_schedule_change", args=[schedule.pk])


def test_the_change_page_and_the_list_say_managed_by_the_file(admin_client, managed):
    assert "managed by schedules.yaml" in admin_client.get(_change(managed)).content.decode()
    assert "managed by schedules.yaml" in admin_client.get(LIST).content.decode()


def test_an_edit_of_a_managed_field_is_refused_under_the_field_and_saves_nothing(admin_client, managed,
                                                                                 standard_class):
    response = admin_client.post(_change(managed), _posted(standard_class, priority="9"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["priority"] and errors["priority"][0].startswith("is managed by schedules.yaml")
    assert Schedule.objects.get(pk=managed.pk).priority == 5
    # the same values saved back are no edit, and pausing is an operation
    assert admin_client.post(_change(managed), _posted(standard_class)).status_code == 302
    assert admin_client.post(_change(managed), _posted(standard_class, enabled="")).status_code == 302
    assert not Schedule.objects.get(pk=managed.pk).enabled


def test_the_detach_action_is_audited_and_then_the_edit_saves(admin_client, managed, standard_class):
    admin_client.post(LIST, {"action": "detach", "_selected_action": [managed.pk]})
    assert Schedule.objects.get(pk=managed.pk).source_file == ""
    assert AuditEntry.objects.get(action="schedule.detach").actor == "ada"
    assert admin_client.post(_change(managed), _posted(standard_class, priority="9")).status_code == 302
    assert Schedule.objects.get(pk=managed.pk).priority == 9


def test_a_delete_with_unfinished_runs_is_refused_naming_them_and_the_action_stops_them(admin_client, make_schedule,
                                                                                       make_run, now):
    schedule = make_schedule("orders")
    running = make_run(schedule, RunStatus.RUNNING, started_at=now, heartbeat_at=now)
    delete_url = reverse("admin:scheduler_schedule_delete", args=[schedule.pk])
    response = admin_client.post(delete_url, {"post": "yes"}, follow=True)
    page = response.content.decode()
    assert f"unfinished runs: {running.pk} (RUNNING)" in page
    assert Schedule.objects.filter(pk=schedule.pk).exists()

    response = admin_client.post(LIST, {"action": "delete_stopping_runs", "_selected_action": [schedule.pk]},
                                 follow=True)
    assert "its runs are being stopped" in response.content.decode()
    assert Run.objects.get(pk=running.pk).stopping
    assert Schedule.objects.get(pk=schedule.pk).deleting_at is not None
    assert "being deleted" in admin_client.get(LIST).content.decode()
    response = admin_client.post(LIST, {"action": "enable", "_selected_action": [schedule.pk]}, follow=True)
    assert "is being deleted" in response.content.decode() and not Schedule.objects.get(pk=schedule.pk).enabled


def test_the_delete_action_deletes_at_once_when_nothing_runs(admin_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    make_run(schedule, RunStatus.QUEUED)
    admin_client.post(LIST, {"action": "delete_stopping_runs", "_selected_action": [schedule.pk]})
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
    assert AuditEntry.objects.filter(action="schedule.delete", actor="ada").exists()


def test_djangos_bulk_delete_refuses_a_selection_with_unfinished_runs_as_a_whole(admin_client, make_schedule,
                                                                                make_run):
    idle, busy = make_schedule("idle"), make_schedule("busy")
    queued = make_run(busy, RunStatus.QUEUED)
    response = admin_client.post(LIST, {"action": "delete_selected", "post": "yes",
                                        "_selected_action": [idle.pk, busy.pk]})
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(said) == 1 and said[0].startswith(f"schedule 'busy' has unfinished runs: {queued.pk} (QUEUED)")
    assert Schedule.objects.filter(pk__in=[idle.pk, busy.pk]).count() == 2
    admin_client.post(LIST, {"action": "delete_selected", "post": "yes", "_selected_action": [idle.pk]})
    assert not Schedule.objects.filter(pk=idle.pk).exists()
