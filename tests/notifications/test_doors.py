"""Every door checks channel URLs when they are saved (naming the field and the bad URL, changing nothing) and
shows them masked: service, admin, `team` command, schedules file, SchedulerHost; pages, admin list, audit, export."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Schedule, Team
from scheduler.services.integrations.channels import mask_url
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_files import (
    UNCHANGED,
    ScheduleFileError,
    schedules_apply,
    schedules_export,
)
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.access.teams import team_save
from tests.views.test_admin import _form

pytestmark = pytest.mark.django_db

BAD = "slak://T1/B2/C3"
SLACK = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ"
SLACK_TOKEN = "TIiajkdnlazkcOXrIdevi7FQ"
HOOK = "jsons://etl:hunter2-secret@hooks.example.com/etl"


def _nothing_changed(schedules=0, teams=("default",)):
    assert Schedule.objects.count() == schedules
    assert sorted(Team.objects.values_list("name", flat=True)) == sorted(teams)


# --- refused at save, the field and the URL named ---------------------------------------------

def test_the_services_refuse_a_url_apprise_cannot_use(make_schedule, default_team):
    with pytest.raises(ServiceError, match=f"'{BAD}' is not a URL Apprise can send to") as info:
        make_schedule("orders", alert_channels=f"mailto://ok@example.com\n{BAD}")
    assert info.value.field == "alert_channels"
    with pytest.raises(ServiceError, match="is not a URL Apprise") as info:
        team_save(data={"name": "ml", "alert_channels": [BAD]}, actor="tests")
    assert info.value.field == "alert_channels"
    _nothing_changed()


def test_two_bad_urls_are_both_named(make_schedule, default_team):
    with pytest.raises(ServiceError) as info:
        make_schedule("orders", alert_channels=["nope://a", "also-not-a-url"])
    assert [e.field for e in info.value.errors] == ["alert_channels", "alert_channels"]
    assert "nope://a" in str(info.value) and "also-not-a-url" in str(info.value)


def test_a_json_list_is_read_and_a_broken_one_is_refused(make_schedule):
    assert make_schedule("a", alert_channels='["mailto://x@example.com", "ntfy://topic"]').alert_channels == \
        "mailto://x@example.com\nntfy://topic"
    with pytest.raises(ServiceError, match="looks like a JSON list"):
        make_schedule("b", alert_channels='["mailto://x@example.com"')
    with pytest.raises(ServiceError, match="must be a URL string"):
        make_schedule("c", alert_channels=[7])


def test_an_unparsable_url_is_named_with_its_password_hidden(make_schedule):
    with pytest.raises(ServiceError) as info:
        make_schedule("orders", alert_channels="nope://user:hunter2-secret@host/x")
    assert "hunter2-secret" not in str(info.value) and "nope://user:****@host/x" in str(info.value)


def test_the_admin_schedule_and_team_forms_name_the_field(admin_client, standard_class, default_team):
    response = admin_client.post(reverse("admin:scheduler_schedule_add"), _form(standard_class, alert_channels=BAD))
    assert response.status_code == 200
    assert "is not a URL Apprise" in " ".join(response.context["adminform"].form.errors["alert_channels"])
    response = admin_client.post(reverse("admin:scheduler_team_add"), {"name": "ml", "alert_channels": BAD})
    assert "is not a URL Apprise" in " ".join(response.context["adminform"].form.errors["alert_channels"])
    _nothing_changed()


def test_the_team_command_names_the_field_and_exits_2(default_team):
    with pytest.raises(CommandError, match="alert_channels: 'slak://T1/B2/C3' is not a URL Apprise"):
        call_command("team", "create", "ml", "--channel", "mailto://ok@example.com", "--channel", BAD)
    _nothing_changed()


def test_the_schedules_file_names_the_entry_and_the_field(default_team):
    text = f"schedules:\n  - name: orders\n    target_id: demo.noop\n    alert_channels: ['{BAD}']\n"
    with pytest.raises(ScheduleFileError, match=r"orders.*alert_channels.*is not a URL Apprise"):
        schedules_apply(text=text, actor="tests")
    _nothing_changed()


def test_scheduler_host_names_the_field(standard_class, default_team):
    with pytest.raises(ServiceError) as info:
        SchedulerHost().schedules.create("orders", target_id="demo.noop", alert_channels=[BAD])
    assert info.value.field == "alert_channels"
    _nothing_changed()


# --- shown masked --------------------------------------------------------------------------

@pytest.fixture
def secret_channels(make_schedule):
    team = team_save(data={"name": "billing", "alert_channels": [SLACK, "mailto://billing@example.com"]},
                     actor="tests")
    schedule = make_schedule("invoices", owner="billing", alert_channels=[HOOK])
    return team, schedule


def test_pages_show_channels_masked(admin_client, secret_channels):
    team, schedule = secret_channels
    for url in (reverse("scheduler:team_detail", args=[team.pk]),
                reverse("scheduler:schedule_detail", args=[schedule.pk]),
                reverse("admin:scheduler_team_changelist")):
        text = admin_client.get(url).content.decode()
        assert SLACK_TOKEN not in text and "hunter2-secret" not in text, url
    team_page = admin_client.get(reverse("scheduler:team_detail", args=[team.pk])).content.decode()
    assert "slack://T...2/A...D/T...Q" in team_page and "mailto://billing@example.com" in team_page
    schedule_page = admin_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert "jsons://etl:****@hooks.example.com/etl" in schedule_page


def test_the_admin_forms_show_masked_urls_and_saving_them_back_keeps_the_secret(admin_client, secret_channels):
    team, _schedule = secret_channels
    url = reverse("admin:scheduler_team_change", args=[team.pk])
    form = admin_client.get(url).context["adminform"].form
    shown = form.initial["alert_channels"]
    assert SLACK_TOKEN not in shown and "slack://T...2" in shown
    response = admin_client.post(url, {"name": "billing", "description": "money", "alert_channels": shown})
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.alert_channels == f"{SLACK}\nmailto://billing@example.com" and team.description == "money"


def test_the_audit_log_keeps_channels_masked(secret_channels):
    team, schedule = secret_channels
    team_save(data={"alert_channels": [HOOK]}, team=team, actor="tests")
    schedule_save(data={"alert_channels": []}, schedule=schedule, actor="tests")
    text = " ".join(str((e.before, e.after)) for e in AuditEntry.objects.all())
    assert SLACK_TOKEN not in text and "hunter2-secret" not in text
    update = AuditEntry.objects.filter(action="team.update").get()
    assert update.after == {"alert_channels": ["jsons://etl:****@hooks.example.com/etl"]}


def test_a_changed_password_is_audited_as_a_change_even_though_both_look_alike(secret_channels):
    _team, schedule = secret_channels
    schedule_save(data={"alert_channels": [HOOK.replace("hunter2", "hunter3")]}, schedule=schedule, actor="tests")
    assert AuditEntry.objects.filter(action="schedule.update", target_id=str(schedule.pk)).exists()


def test_the_team_command_shows_channels_masked(secret_channels):
    out = StringIO()
    call_command("team", "show", "billing", stdout=out)
    assert "slack://T...2/A...D/T...Q" in out.getvalue() and SLACK_TOKEN not in out.getvalue()


def test_the_export_masks_channels_and_applying_it_back_keeps_the_stored_urls(secret_channels):
    _team, schedule = secret_channels
    text = schedules_export(["invoices"])
    assert "hunter2-secret" not in text and "jsons://etl:****@hooks.example.com/etl" in text
    plan = schedules_apply(text=text, actor="tests")
    assert plan.summary[UNCHANGED] == 1
    schedule.refresh_from_db()
    assert schedule.alert_channels == HOOK


def test_scheduler_host_sends_a_test_notification(make_schedule, receiver):
    server = receiver()
    make_schedule("orders", alert_channels=[server.url("json")])
    result = SchedulerHost().schedules.test_channel("orders", 0, actor="tests")
    assert result["ok"] is True and len(server.requests) == 1


def test_setup_demo_gives_the_report_a_channel(db, tmp_path, settings):
    settings.ETL_DEMO_SOURCE_DB = str(tmp_path / "src.sqlite3")
    settings.ETL_DEMO_WAREHOUSE_DB = str(tmp_path / "wh.sqlite3")
    call_command("setup_demo", "--no-kickoff", stdout=StringIO())
    assert Schedule.objects.get(name="daily_report").alert_channels == "mailto://reports-oncall@example.com"


def test_apply_schedules_prints_the_plan_with_channels_masked(secret_channels, tmp_path):
    path = tmp_path / "schedules.yaml"
    path.write_text("schedules:\n  - name: invoices\n    target_id: demo.noop\n    owner: billing\n"
                    f"    alert_channels: ['{HOOK.replace('hunter2', 'hunter3')}']\n")
    out = StringIO()
    call_command("apply_schedules", str(path), "--dry-run", stdout=out)
    assert "alert_channels" in out.getvalue() and "hunter" not in out.getvalue()
    out = StringIO()
    call_command("apply_schedules", str(path), "--dry-run", "--json", stdout=out)
    assert "alert_channels" in out.getvalue() and "hunter" not in out.getvalue()


def test_scheduler_host_spec_masks_and_an_update_with_it_keeps_the_secret(secret_channels):
    _team, schedule = secret_channels
    host = SchedulerHost()
    spec = host.schedules.spec("invoices")
    assert spec["alert_channels"] == ["jsons://etl:****@hooks.example.com/etl"]
    host.schedules.update("invoices", actor="tests", alert_channels=spec["alert_channels"] + ["ntfy://etl-topic"])
    schedule.refresh_from_db()
    assert schedule.alert_channels == f"{HOOK}\nntfy://etl-topic"


def test_the_team_command_replaces_adds_and_clears_channels(default_team):
    call_command("team", "create", "ml", "--channel", "ntfy://ml-alerts", stdout=StringIO())
    call_command("team", "update", "ml", "--emails", "lead@example.com", stdout=StringIO())
    assert Team.objects.get(name="ml").alert_channels == "ntfy://ml-alerts\nmailto://lead@example.com"
    call_command("team", "update", "ml", "--channel", SLACK, stdout=StringIO())
    assert Team.objects.get(name="ml").alert_channels == SLACK
    call_command("team", "update", "ml", "--no-channels", stdout=StringIO())
    assert Team.objects.get(name="ml").alert_channels == ""


@pytest.mark.parametrize("url", [
    "jsons://hooks.example.com/etl?+Authorization=Bearer%20sekrit-token-123",
    "etlhooks://hooks.example.com/etl?+X-Api-Key=sekrit-token-123",
    "jsons://hooks.example.com/etl?-apikey=sekrit-token-123",
    "forms://hooks.example.com/etl?:token=sekrit-token-123",
    "etlhooks://etl:sekrit-token-123@hooks.example.com/etl",
])
def test_header_query_and_payload_values_in_a_url_are_masked_everywhere(url, admin_client, make_schedule):
    schedule = make_schedule("tokened", alert_channels=[url])
    assert "sekrit-token-123" not in mask_url(url)
    text = " ".join(str((e.before, e.after)) for e in AuditEntry.objects.all())
    text += schedules_export(["tokened"]) + str(SchedulerHost().schedules.spec("tokened"))
    text += admin_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    text += admin_client.get(reverse("admin:scheduler_schedule_change", args=[schedule.pk])).content.decode()
    assert "sekrit-token-123" not in text
    assert schedules_apply(text=schedules_export(["tokened"]), actor="tests").summary[UNCHANGED] == 1
    schedule.refresh_from_db()
    assert schedule.alert_channels == url  # saving back what was shown keeps the secret
