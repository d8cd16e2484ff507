"""The admin and teams: staff of another team read but cannot change; admins manage teams through the services."""

from __future__ import annotations

from html import unescape

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from scheduler.models import AuditEntry, BreakerStatus, RefusalCount, Run, Schedule, Team
from scheduler.services.access.teams import team_save, team_set_members
from tests.views.test_admin import _form

CHANGELIST = reverse("admin:scheduler_schedule_changelist")


@pytest.fixture
def billing(db):
    return team_save(data={"name": "billing"}, actor="tests")


@pytest.fixture
def staff_operator(make_user, billing):
    """A staff operator of billing who may also edit and delete schedules (of billing)."""
    user = make_user("sam", "operator", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_schedule", "delete_schedule"]))
    team_set_members(team=billing, add=[user], actor="tests")
    return user


@pytest.fixture
def staff_client(client, staff_operator):
    client.force_login(staff_operator)
    return client


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def _state():
    return (
        list(Schedule.objects.order_by("id").values_list("id", "name", "enabled", "breaker_status", "owner_id")),
        list(Run.objects.order_by("id").values_list("id", "status")),
        AuditEntry.objects.exclude(action="permission.denied").count(),
    )


def test_staff_of_another_team_see_the_schedule_read_only_and_every_change_is_refused(
        staff_client, make_schedule, standard_class):
    other = make_schedule("orders")  # the default team
    Schedule.objects.filter(pk=other.pk).update(breaker_status=BreakerStatus.OPEN)
    before = _state()
    change = reverse("admin:scheduler_schedule_change", args=[other.pk])

    page = staff_client.get(change)
    assert page.status_code == 200 and not page.context["has_change_permission"]
    posted = staff_client.post(change, _form(standard_class, name="orders", enabled=""))
    assert posted.status_code == 403 and "sam may not edit schedule 'orders'" in unescape(posted.content.decode())
    deleted = staff_client.post(reverse("admin:scheduler_schedule_delete", args=[other.pk]), {"post": "yes"})
    assert deleted.status_code == 403 and "sam may not delete schedule 'orders'" in unescape(deleted.content.decode())
    bulk_delete = staff_client.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [other.pk]})
    assert bulk_delete.status_code == 403 and "sam may not delete" in unescape(bulk_delete.content.decode())
    for action in ["disable", "enable", "run_now", "reset_breaker"]:
        response = staff_client.post(CHANGELIST, {"action": action, "_selected_action": [other.pk], "post": "yes"},
                                     follow=True)
        assert response.status_code == 200
        shown = " ".join(str(m) for m in response.context["messages"])
        assert "sam may not" in shown and "team 'default'" in shown, (action, shown)
    assert _state() == before
    refused = AuditEntry.objects.filter(action="permission.denied", actor="sam")
    assert sum(RefusalCount.objects.filter(actor="sam").values_list("count", flat=True)) == 7
    assert set(refused.values_list("target_id", flat=True)) == {str(other.pk)}


def test_staff_act_on_their_own_teams_schedules(staff_client, make_schedule, standard_class, billing):
    mine = make_schedule("invoices", owner="billing")
    response = staff_client.post(CHANGELIST, {"action": "disable", "_selected_action": [mine.pk]})
    assert response.status_code == 302
    mine.refresh_from_db()
    assert not mine.enabled
    change = reverse("admin:scheduler_schedule_change", args=[mine.pk])
    assert staff_client.post(change, _form(standard_class, name="invoices", owner=str(billing.pk))).status_code == 302


def test_staff_may_give_a_schedule_only_to_their_own_teams(staff_client, make_schedule, standard_class,
                                                          default_team):
    mine = make_schedule("invoices", owner="billing")
    change = reverse("admin:scheduler_schedule_change", args=[mine.pk])
    response = staff_client.post(change, _form(standard_class, name="invoices", owner=str(default_team.pk)))
    assert response.status_code == 200 and "owner" in response.context["adminform"].form.errors
    assert Schedule.objects.get(pk=mine.pk).owner.name == "billing"


def test_staff_runs_of_another_team_cannot_be_cancelled(client, make_user, make_schedule, billing, now):
    from scheduler.services.runs.queue import run_trigger_manual

    user = make_user("sam", "operator", is_staff=True)
    team_set_members(team=billing, add=[user], actor="tests")
    client.force_login(user)
    run = run_trigger_manual(schedule=make_schedule("orders"), actor="tests", now=now)
    response = client.post(reverse("admin:scheduler_run_changelist"),
                           {"action": "cancel", "_selected_action": [run.pk]}, follow=True)
    assert "sam may not cancel runs of schedule 'orders'" in " ".join(str(m) for m in response.context["messages"])
    assert Run.objects.get(pk=run.pk).status == "QUEUED"


def test_an_admin_creates_a_team_with_members_through_the_services(admin_client, make_user):
    olga = make_user("olga", "operator")
    response = admin_client.post(reverse("admin:scheduler_team_add"), {
        "name": "ml", "description": "models", "members": [str(olga.pk)],
        "alert_channels": "mailto://ml@example.com\netlhooks://hooks.example/ml",
    })
    assert response.status_code == 302
    team = Team.objects.get(name="ml")
    assert list(team.members.all()) == [olga] and team.alert_webhook_secret
    actions = sorted(AuditEntry.objects.filter(team_id=team.pk).values_list("action", flat=True))
    assert actions == ["team.create", "team.members"]


def test_bad_team_input_in_the_admin_names_the_field(admin_client):
    response = admin_client.post(reverse("admin:scheduler_team_add"), {
        "name": "ml", "alert_channels": "mailto://ml@example.com\nslak://nobody"})
    assert response.status_code == 200
    errors = " ".join(response.context["adminform"].form.errors["alert_channels"])
    assert "'slak://nobody' is not a URL Apprise can send to" in errors
    assert not Team.objects.filter(name="ml").exists()


def test_an_operator_sees_teams_but_cannot_manage_them_in_the_admin(staff_client, billing):
    page = staff_client.get(reverse("admin:scheduler_team_change", args=[billing.pk]))
    assert page.status_code == 200 and not page.context["has_change_permission"]
    assert staff_client.post(reverse("admin:scheduler_team_change", args=[billing.pk]),
                             {"name": "renamed"}).status_code == 403
    assert staff_client.post(reverse("admin:scheduler_team_add"), {"name": "x"}).status_code == 403
    assert not Team.objects.filter(name__in=["x", "renamed"]).exists()


def test_the_owner_is_required_and_the_form_says_which_teams_one_may_choose(staff_client, staff_operator,
                                                                           standard_class):
    # an empty owner used to land the schedule in the default team, unseen (issue 22)
    staff_operator.user_permissions.add(
        Permission.objects.get(codename="add_schedule", content_type__app_label="scheduler"))
    add = reverse("admin:scheduler_schedule_add")
    page = staff_client.get(add).content.decode()
    assert "You may choose: billing." in page
    response = staff_client.post(add, _form(standard_class, name="invoices", owner=""))
    assert response.status_code == 200 and "owner" in response.context["adminform"].form.errors
    assert not Schedule.objects.filter(name="invoices").exists()


def test_the_api_and_the_facade_refuse_the_default_team_to_a_user_who_is_not_in_it(staff_operator):
    from scheduler.host import SchedulerHost
    from scheduler.services.access.teams import PermissionRefused

    staff_operator.user_permissions.add(
        Permission.objects.get(codename="add_schedule", content_type__app_label="scheduler"))
    with pytest.raises(PermissionRefused, match="team 'default'"):
        SchedulerHost().schedules.create("invoices", target_id="demo.noop", trigger_kind="manual",
                                         actor=staff_operator)
    assert not Schedule.objects.filter(name="invoices").exists()
    made = SchedulerHost().schedules.create("invoices", target_id="demo.noop", trigger_kind="manual",
                                            owner="billing", actor=staff_operator)
    assert made.owner.name == "billing"
