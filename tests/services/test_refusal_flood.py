"""Refusals stay auditable but cannot flood the log: one audit entry per actor, permission, object and window."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, RefusalCount
from scheduler.services.common.audit import audit_refusal
from scheduler.services.access.teams import PermissionRefused, authorize, team_save, team_set_members

pytestmark = pytest.mark.django_db


@pytest.fixture
def outsider(make_user):
    user = make_user("oscar", "operator")
    team_set_members(team=team_save(data={"name": "billing"}, actor="tests"), add=[user], actor="tests")
    return user


def test_a_hundred_refused_gets_are_one_audit_entry_with_a_count(client, outsider, make_schedule, settings):
    settings.ETL_TEAMS_VIEW_ALL = False
    schedule = make_schedule("orders")
    client.force_login(outsider)
    for _ in range(100):
        assert client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).status_code == 403
    denied = AuditEntry.objects.filter(action="permission.denied", actor="oscar")
    assert denied.count() == 1 and denied.get().target_repr == "orders"
    counted = RefusalCount.objects.get(actor="oscar")
    assert counted.count == 100 and counted.audit_entry_id == denied.get().pk


def test_another_object_or_permission_is_its_own_entry(outsider, make_schedule):
    a, b = make_schedule("a"), make_schedule("b")
    for obj, perm in [(a, "scheduler.trigger_schedule"), (b, "scheduler.trigger_schedule"),
                      (a, "scheduler.toggle_schedule"), (a, "scheduler.trigger_schedule")]:
        with pytest.raises(PermissionRefused):
            authorize(actor=outsider, perm=perm, obj=obj)
    assert AuditEntry.objects.filter(action="permission.denied").count() == 3
    assert sorted(RefusalCount.objects.values_list("count", flat=True)) == [1, 1, 2]


def test_a_new_window_writes_a_new_entry(outsider, make_schedule, now, settings):
    settings.ETL_AUDIT_REFUSAL_WINDOW_SECONDS = 60
    schedule = make_schedule("orders")
    for at in (now, now + timedelta(seconds=30), now + timedelta(seconds=61), now + timedelta(seconds=62)):
        audit_refusal(user=outsider, perm="scheduler.trigger_schedule", target=schedule, reason="no", now=at)
    assert AuditEntry.objects.filter(action="permission.denied").count() == 2
    assert sorted(RefusalCount.objects.values_list("count", flat=True)) == [2, 2]
