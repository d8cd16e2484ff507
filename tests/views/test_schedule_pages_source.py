"""The schedule page and the schedules list say which file manages a schedule, and that a delete is under way."""
from __future__ import annotations

import pytest
from django.urls import reverse

from scheduler.models import Schedule
from scheduler.services.definitions.schedule_files import schedules_apply

pytestmark = pytest.mark.django_db
FILE = "version: 1\nschedules:\n  - {name: orders, target_id: demo.noop, trigger_kind: manual}\n"


def test_the_pages_say_managed_by_the_file(operator_client, standard_class, make_schedule):
    schedules_apply(text=FILE, actor="user:ci", source="schedules.yaml")
    make_schedule("adhoc")
    managed = Schedule.objects.get(name="orders")
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[managed.pk])).content.decode()
    assert 'id="managed-line"' in page and "Managed by schedules.yaml" in page and "by ci" in page
    other = operator_client.get(reverse("scheduler:schedule_detail", args=[Schedule.objects.get(name="adhoc").pk]))
    assert 'id="managed-line"' not in other.content.decode()
    listed = operator_client.get(reverse("scheduler:schedules")).content.decode()
    assert listed.count("managed by schedules.yaml") == 1


def test_the_schedule_page_says_a_delete_waits_for_its_runs(operator_client, make_schedule, now):
    schedule = make_schedule("orders")
    Schedule.objects.filter(pk=schedule.pk).update(deleting_at=now, deleting_by="olivia", enabled=False)
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert 'id="deleting-line"' in page and "asked by olivia" in page
