"""Teams: ownership, the object permission rule, team services, alerts to the owner, SchedulerHost's actor."""
from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from django.core import mail

from scheduler.host import SchedulerHost
from scheduler.models import Alert, AuditEntry, Backfill, RefusalCount, Run, Schedule, Team
from scheduler.services.oversight import alerts
from scheduler.services.integrations import channels
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.access.teams import (
    PermissionRefused,
    authorize,
    resolve_user,
    team_delete,
    team_rotate_secret,
    team_save,
    team_set_members,
    visible_team_ids,
)

WM = {"type": "integer", "column": "id", "initial": 0}


@pytest.fixture
def billing(db):
    return team_save(data={"name": "billing", "alert_channels": "mailto://billing@example.com"}, actor="tests")


@pytest.fixture
def outsider(make_user, billing):
    """An operator of billing only."""
    user = make_user("oscar", "operator")
    team_set_members(team=billing, add=[user], actor="tests")
    return user


@pytest.fixture
def team_admin(make_user):
    return make_user("ada", "admin")


# --- ownership -------------------------------------------------------------------


def test_a_schedule_made_without_an_owner_belongs_to_the_default_team(make_schedule, default_team):
    assert make_schedule("orders").owner == default_team
    assert default_team.name == "default"


def test_a_schedule_names_its_owner_and_a_change_of_owner_is_audited(make_schedule, billing):
    schedule = make_schedule("orders", owner="billing")
    assert schedule.owner == billing
    schedule_save(data={"owner": "default"}, schedule=schedule, actor="tests")
    entry = AuditEntry.objects.filter(action="schedule.update").latest("id")
    assert entry.before == {"owner": "billing"} and entry.after == {"owner": "default"}


@pytest.mark.parametrize("owner, text", [("nobody", "unknown team 'nobody'"), (5, "must be a team name")])
def test_an_unknown_owner_is_refused_naming_the_field(make_schedule, owner, text):
    with pytest.raises(ServiceError, match=text) as info:
        make_schedule("orders", owner=owner)
    assert info.value.field == "owner"
    assert not Schedule.objects.filter(name="orders").exists()


def test_audit_entries_carry_the_owning_team(make_schedule, billing, now):
    schedule = make_schedule("orders", owner="billing")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    run_cancel(run=run, actor="tests", reason="r")
    entries = AuditEntry.objects.filter(target_type__in=["schedule", "run"])
    assert {e.action for e in entries} == {"schedule.create", "run.trigger", "run.cancel"}
    assert {e.team_id for e in entries} == {billing.pk}


# --- the rule ----------------------------------------------------------------------


def test_an_operator_acts_only_on_schedules_of_their_teams(make_schedule, operator, outsider, now):
    mine = make_schedule("orders")  # the default team, olivia's
    theirs = make_schedule("invoices", owner="billing")
    run = run_trigger_manual(schedule=mine, actor="tests", now=now)
    assert operator.has_perm("scheduler.trigger_schedule", mine)
    assert operator.has_perm("scheduler.cancel_run", run)
    assert not operator.has_perm("scheduler.trigger_schedule", theirs)
    assert outsider.has_perm("scheduler.reset_breaker", theirs)
    assert not outsider.has_perm("scheduler.cancel_run", run)
    assert not outsider.has_perm("scheduler.manage_watermark", mine)
    # the model question is unchanged: an operator may trigger schedules
    assert outsider.has_perm("scheduler.trigger_schedule")


def test_an_admin_acts_on_every_team_and_a_viewer_on_none(make_schedule, team_admin, viewer, billing):
    schedule = make_schedule("invoices", owner="billing")
    team_set_members(team=billing, add=[viewer], actor="tests")
    assert team_admin.has_perm("scheduler.trigger_schedule", schedule)
    assert team_admin.has_perm("scheduler.change_schedule", schedule)
    assert not viewer.has_perm("scheduler.trigger_schedule", schedule)  # membership does not add rights
    assert viewer.has_perm("scheduler.view_schedule", schedule)


def test_viewing_other_teams_follows_the_setting(make_schedule, outsider, settings):
    schedule = make_schedule("orders")
    assert outsider.has_perm("scheduler.view_schedule", schedule)
    assert visible_team_ids(outsider) is None
    settings.ETL_TEAMS_VIEW_ALL = False
    assert not outsider.has_perm("scheduler.view_schedule", schedule)
    assert visible_team_ids(outsider) == {Team.objects.get(name="billing").pk}


def test_a_refusal_is_audited_and_names_the_team(make_schedule, outsider):
    schedule = make_schedule("orders")
    with pytest.raises(PermissionRefused, match="oscar may not trigger schedule 'orders': it belongs to team "
                                                "'default' and oscar is not a member"):
        authorize(actor=outsider, perm="scheduler.trigger_schedule", obj=schedule)
    entry = AuditEntry.objects.get(action="permission.denied")
    assert entry.actor == "oscar" and entry.target_id == str(schedule.pk)
    assert entry.after == {"permission": "scheduler.trigger_schedule"} and entry.team_id == schedule.owner_id


def test_actors_resolve_to_users_by_name_and_system_actors_pass(make_schedule, outsider):
    schedule = make_schedule("orders")
    assert resolve_user("oscar") == outsider and resolve_user("user:oscar") == outsider
    assert resolve_user("api:etl-bot") is None and resolve_user("governance") is None
    authorize(actor="governance", perm="scheduler.trigger_schedule", obj=schedule)  # no error
    with pytest.raises(PermissionRefused):
        authorize(actor="user:oscar", perm="scheduler.trigger_schedule", obj=schedule)


# --- SchedulerHost takes an actor ------------------------------------------------------


def test_the_host_applies_the_rule_to_its_actor(make_schedule, operator, outsider):
    from scheduler.services.admission.backfills import backfill_submit

    host = SchedulerHost()
    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="20", window="10", reason="r", requested_by="tests")
    runs, audits = Run.objects.count(), AuditEntry.objects.exclude(action="permission.denied").count()
    refused = [
        lambda: host.trigger_manual("orders", actor="oscar"),
        lambda: host.submit_backfill("orders", "0", "10", "10", reason="r", requested_by="oscar"),
        lambda: host.reset_circuit_breaker("orders", reset_by="oscar"),
        lambda: host.watermarks.set("orders", "5", reason="r", actor="oscar"),
        lambda: host.watermarks.reset("orders", reason="r", actor="oscar"),
        lambda: host.backfills.pause(backfill.pk, actor="oscar"),
        lambda: host.backfills.cancel(backfill.pk, actor="oscar"),
        lambda: host.backfills.retry_failed(backfill.pk, actor="oscar"),
    ]
    for call in refused:
        with pytest.raises(PermissionRefused, match="oscar may not"):
            call()
    assert Run.objects.count() == runs and Backfill.objects.count() == 1
    assert AuditEntry.objects.exclude(action="permission.denied").count() == audits
    assert sum(RefusalCount.objects.filter(actor="oscar").values_list("count", flat=True)) == len(refused)
    # the owning team's operator, and a script's system actor, may
    assert host.trigger_manual("orders", actor="olivia")
    assert host.trigger_manual("orders", actor="api:etl-bot")


# --- team services ---------------------------------------------------------------------


def test_a_team_is_created_with_a_webhook_secret_and_audited(db):
    team = team_save(data={"name": "ml", "alert_channels": "etlhooks://hooks.example/ml"}, actor="tests")
    assert len(team.alert_webhook_secret) >= 32
    old = team.alert_webhook_secret
    assert team_rotate_secret(team=team, actor="tests") != old
    actions = list(AuditEntry.objects.filter(team_id=team.pk).values_list("action", flat=True))
    assert sorted(actions) == ["team.create", "team.rotate_secret"]


@pytest.mark.parametrize(
    "data, field, text",
    [
        ({"name": "bad name"}, "name", "letters, digits"),
        ({"name": "ok", "alert_channels": "not-an-address"}, "alert_channels", "is not a URL Apprise can send to"),
        ({"name": "ok", "alert_channels": "ftp://x"}, "alert_channels", "'ftp://x' is not a URL Apprise"),
        ({"name": "ok", "description": "x\x00"}, "description", "NUL"),
        ({"name": "ok", "colour": "red"}, "colour", "unknown field"),
        ({"name": "default"}, "name", "already exists"),
    ],
)
def test_bad_team_input_is_refused_naming_the_field(default_team, data, field, text):
    with pytest.raises(ServiceError, match=text) as info:
        team_save(data=data, actor="tests")
    assert info.value.field == field
    assert list(Team.objects.values_list("name", flat=True)) == ["default"]


def test_a_team_that_owns_schedules_or_is_the_default_is_not_deleted(make_schedule, billing, default_team):
    make_schedule("invoices", owner="billing")
    with pytest.raises(ServiceError, match=r"still owns schedules \(invoices\)"):
        team_delete(team=billing, actor="tests")
    with pytest.raises(ServiceError, match="default team"):
        team_delete(team=default_team, actor="tests")
    Schedule.objects.filter(name="invoices").update(owner=default_team)
    team_delete(team=billing, actor="tests")
    assert not Team.objects.filter(name="billing").exists()
    assert AuditEntry.objects.filter(action="team.delete", target_repr="billing").exists()


def test_only_admins_manage_teams_when_the_actor_is_a_user(billing, outsider, team_admin):
    with pytest.raises(PermissionRefused, match="lacks the permission scheduler.change_team"):
        team_set_members(team=billing, add=["ada"], actor=outsider)
    assert team_set_members(team=billing, add=["ada"], actor=team_admin) == ["ada", "oscar"]


# --- alerts go to the owner ------------------------------------------------------------


@pytest.fixture
def sync_alerts(settings):
    settings.ETL_ALERTS_SYNC = True
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True  # the signed webhook's send is faked here: no address is resolved
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    settings.ETL_ALERT_WEBHOOK_URL = ""
    settings.ETL_ALERT_WEBHOOK_SECRET = "global-secret"


def test_channels_are_the_owning_teams_with_the_global_ones_as_fallback(make_schedule, billing, sync_alerts):
    theirs = make_schedule("invoices", owner="billing", alert_channels="mailto://lead@example.com")
    unowned = make_schedule("orders")  # the default team has no channels
    assert alerts.channels_for(theirs) == [
        {"url": "mailto://lead@example.com", "source": "schedule"},
        {"url": "mailto://billing@example.com", "source": "team", "team": billing.pk},
    ]
    assert alerts.channels_for(unowned) == [{"url": "mailto://ops@example.com", "source": "global"}]
    assert alerts.channels_for(None) == [{"url": "mailto://ops@example.com", "source": "global"}]


@pytest.mark.django_db(transaction=True)
def test_a_breaker_alert_goes_to_the_team_once_with_its_webhook_signed_by_the_teams_secret(
        make_schedule, sync_alerts, monkeypatch):
    posted = []

    def fake_send(plugin, *args, **kwargs):
        body = json.dumps(plugin.etl_payload, sort_keys=True).encode()
        secret = plugin.etl_secret
        posted.append((plugin.request_url, hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(), secret))
        return True

    monkeypatch.setattr(channels.NotifySignedJSON, "send", fake_send)
    team = team_save(data={"name": "billing",
                           "alert_channels": "mailto://billing@example.com\netlhooks://hooks.example/billing"},
                     actor="tests")
    schedule = make_schedule("invoices", owner="billing")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status="open")
    schedule.refresh_from_db()
    for _ in range(2):  # the same incident twice: one alert
        alerts.on_breaker_changed(sender=Schedule, schedule=schedule, old="closed", new="open", reason="3 failures")
    alert = Alert.objects.get()
    assert alert.status == "SENT"
    assert [m.to for m in mail.outbox] == [["billing@example.com"]]
    assert [(url, secret) for url, _sig, secret in posted] == [("https://hooks.example/billing",
                                                                team.alert_webhook_secret)]


# --- the schedules file carries the owner -------------------------------------------------


def test_the_schedules_file_carries_the_owner(billing):
    from scheduler.services.definitions.schedule_files import ScheduleFileError, schedules_apply, schedules_export

    text = "schedules:\n  - name: invoices\n    target_id: demo.noop\n    owner: billing\n"
    schedules_apply(text=text, actor="tests")
    assert Schedule.objects.get(name="invoices").owner == billing
    assert "owner: billing" in schedules_export(["invoices"])
    with pytest.raises(ScheduleFileError, match="owner.*unknown team 'nobody'"):
        schedules_apply(text=text.replace("billing", "nobody"), actor="tests")
    assert Schedule.objects.get(name="invoices").owner == billing


def test_the_host_holds_schedule_edits_to_the_actors_teams(make_schedule, outsider, billing):
    host = SchedulerHost()
    make_schedule("orders")
    with pytest.raises(PermissionRefused, match="oscar lacks the permission scheduler.change_schedule"):
        host.schedules.update("orders", priority=9, actor="oscar")
    assert Schedule.objects.get(name="orders").priority == 5
