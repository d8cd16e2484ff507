"""`team` manages teams; every command that acts on a schedule holds its --actor to that user's teams."""
import getpass
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, Backfill, Run, Schedule, Team, WatermarkHistory

pytestmark = pytest.mark.django_db

WM = {"type": "integer", "column": "id", "initial": 0}


def _json(*args) -> dict | list:
    out = StringIO()
    call_command("team", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def outsider(make_user):
    user = make_user("oscar", "operator")
    _json("create", "billing")
    _json("add-member", "billing", "oscar")
    return user


def test_it_creates_shows_and_lists_a_team(make_user, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")  # the actor by default, as trigger's
    make_user("olga", "operator")
    created = _json("create", "ml", "--description", "models", "--emails", "ml@example.com, lead@example.com",
                    "--webhook-url", "https://hooks.example/ml")
    assert created["webhook_secret"] and len(created["webhook_secret"]) >= 32
    _json("add-member", "ml", "olga")
    shown = _json("show", "ml")
    assert shown == {"name": "ml", "description": "models", "members": ["olga"], "schedules": [],
                     "alert_channels": ["mailto://ml@example.com", "mailto://lead@example.com",
                                        "etlhooks://hooks.example/ml"], "webhook_secret_set": True}  # masked: none
    assert [t["name"] for t in _json("list")] == ["default", "ml"]
    assert set(AuditEntry.objects.filter(actor="shelly").values_list("action", flat=True)) == {
        "team.create", "team.members"}


def test_it_assigns_schedules_and_removes_members(make_schedule, outsider):
    make_schedule("invoices")
    assert _json("assign", "billing", "invoices") == {"team": "billing", "assigned": ["invoices"]}
    assert Schedule.objects.get(name="invoices").owner.name == "billing"
    assert _json("remove-member", "billing", "oscar") == {"team": "billing", "members": []}


def test_rotate_secret_prints_a_new_secret_once(db):
    first = _json("create", "ml", "--webhook-url", "https://hooks.example/ml")["webhook_secret"]
    rotated = _json("rotate-secret", "ml")["webhook_secret"]
    assert rotated != first and Team.objects.get(name="ml").alert_webhook_secret == rotated


@pytest.mark.parametrize(
    "args, message",
    [
        (["create", "bad name"], "name: must be 1-100 letters"),
        (["create", "ml", "--channel", "slak://nobody"], "alert_channels: 'slak://nobody' is not a URL Apprise"),
        (["create", "ml", "--webhook-url", "file:///etc/passwd"], "webhook_url: must be an http:// or https:// URL"),
        (
            ["create", "ml", "--channel", "json://127.0.0.1/x"],
            "alert_channels: json://127.0.0.1/x: points at 127.0.0.1",
        ),
        (["show", "nope"], "unknown team 'nope'"),
        (["add-member", "default", "ghost"], "unknown user 'ghost'"),
        (["assign", "default", "nope"], "unknown schedule 'nope'"),
        (["delete", "default"], "is the default team"),
    ],
)
def test_bad_input_exits_2_naming_the_problem_and_changes_nothing(db, args, message):
    before = list(Team.objects.values_list("name", flat=True))
    with pytest.raises(CommandError, match=message) as info:
        call_command("team", *args, stdout=StringIO())
    assert info.value.returncode == 2
    assert list(Team.objects.values_list("name", flat=True)) == before


def test_an_operator_may_not_manage_teams_or_take_another_teams_schedule(make_schedule, outsider):
    make_schedule("orders")
    with pytest.raises(CommandError, match="oscar lacks the permission scheduler.add_team"):
        call_command("team", "create", "rogue", "--actor", "oscar")
    with pytest.raises(CommandError, match="oscar lacks the permission scheduler.change_schedule"):
        call_command("team", "assign", "billing", "orders", "--actor", "oscar")
    assert Schedule.objects.get(name="orders").owner.name == "default"
    assert not Team.objects.filter(name="rogue").exists()


# --- the schedule commands apply the same rule to --actor ------------------------------------


@pytest.mark.parametrize(
    "command, args, message",
    [
        ("trigger", ["orders"], "may not trigger"),
        ("reset_breaker", ["orders", "--reason", "r"], "may not reset the breaker of"),
        ("backfill", ["orders", "--from", "0", "--to", "10", "--window", "10", "--reason", "r"],
         "may not manage backfills of"),
        ("watermark", ["orders", "--set", "5", "--reason", "r"], "may not change the watermark of"),
        ("watermark", ["orders", "--reset", "--reason", "r"], "may not change the watermark of"),
    ],
)
def test_a_command_refuses_an_actor_of_another_team_with_an_audit_entry(make_schedule, outsider, command, args,
                                                                        message):
    schedule = make_schedule("orders", watermark_config=WM)
    secret = schedule.webhook_secret
    audits = AuditEntry.objects.count()
    with pytest.raises(CommandError, match=f"oscar {message} schedule 'orders': it belongs to team 'default'") as info:
        call_command(command, *args, "--actor", "oscar", stdout=StringIO(), stderr=StringIO())
    assert info.value.returncode == 2
    assert not Run.objects.exists() and not Backfill.objects.exists() and not WatermarkHistory.objects.exists()
    assert Schedule.objects.get(pk=schedule.pk).webhook_secret == secret
    assert AuditEntry.objects.count() == audits + 1
    assert AuditEntry.objects.latest("id").action == "permission.denied"


def test_rotating_a_webhook_secret_as_a_user_needs_edit_rights_on_the_schedule(make_schedule, make_user, outsider):
    schedule = make_schedule("hook", trigger_kind="webhook")
    with pytest.raises(CommandError, match="oscar lacks the permission scheduler.change_schedule"):
        call_command("rotate_webhook_secret", "hook", "--actor", "oscar", stdout=StringIO())
    make_user("ada", "admin")
    call_command("rotate_webhook_secret", "hook", "--actor", "ada", stdout=StringIO())
    assert Schedule.objects.get(pk=schedule.pk).webhook_secret != schedule.webhook_secret


def test_a_member_of_the_owning_team_may(make_schedule, operator):
    make_schedule("orders")
    call_command("trigger", "orders", "--actor", "olivia", stdout=StringIO())
    assert Run.objects.get().triggered_by == "olivia"
