"""Issue 37, points 8 and 14: moving a watermark starts from the current mark and says what happens next; the
admin manages a user in one place, tests a team's channels where they are edited, and previews a trigger's fires
as it is edited."""
from __future__ import annotations

import html
import re
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

from scheduler.models import ApiToken, AuditEntry, Run, Schedule, WatermarkState
from scheduler.services.access.teams import team_save, team_set_members
from scheduler.services.access.tokens import token_create

DAY = {"type": "datetime", "column": "ts", "initial": "2026-11-01T00:00:00+00:00", "max_window": 86400, "lag": 0,
       "overlap": 3600}
BERLIN = ZoneInfo("Europe/Berlin")


def _text(response) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", response.content.decode())))


@pytest.fixture
def berlin(operator_client):
    """The viewer chose Europe/Berlin (CET, UTC+1 in December) in their preferences."""
    operator_client.post(reverse("scheduler:preferences"), {"timezone": "Europe/Berlin"})
    return operator_client


@pytest.fixture
def dated(make_schedule):
    schedule = make_schedule("dated", watermark_config=DAY, trigger_kind="cron", trigger_config={"cron": "0 2 * * *"},
                             timezone="Europe/Berlin")
    WatermarkState.objects.create(schedule=schedule, value="2026-12-03T00:00:00+00:00")
    return schedule


# --- 8: the move starts from the current mark, and says when and from where the next run reads -----------------


def test_the_new_value_is_prefilled_with_the_current_mark_in_the_viewers_zone(berlin, dated):
    page = berlin.get(reverse("scheduler:schedule_detail", args=[dated.pk])).content.decode()
    field = re.search(r'<input type="datetime-local" name="value"[^>]*>', page).group(0)
    assert 'value="2026-12-03T01:00:00"' in field  # 00:00 UTC is 01:00 in Berlin


def test_the_form_says_the_window_starts_the_overlap_before_the_mark_and_when_the_next_run_reads(berlin, dated):
    response = berlin.get(reverse("scheduler:schedule_detail", args=[dated.pk]))
    text = _text(response)
    assert "The next window starts 1 h 0 min (the overlap) before the mark: from 2026-12-03 00:00:00 CET" in text
    fire = dated.next_fire_at.astimezone(BERLIN)
    assert f"The next run fires {fire:%Y-%m-%d %H:%M:%S} CET" in text
    assert '<a href="#run-now" id="watermark-run-now">run now</a>' in response.content.decode()


def test_a_paused_schedule_says_no_run_reads_the_mark_until_resumed(berlin, dated):
    Schedule.objects.filter(pk=dated.pk).update(enabled=False)
    response = berlin.get(reverse("scheduler:schedule_detail", args=[dated.pk]))
    assert "dated is paused: no run reads it until it is resumed" in _text(response)
    assert 'id="watermark-run-now"' not in response.content.decode()


def test_an_integer_mark_is_prefilled_and_its_overlap_counted_in_values(operator_client, make_schedule):
    schedule = make_schedule("ids", watermark_config={"type": "integer", "column": "id", "initial": 0, "overlap": 5})
    WatermarkState.objects.create(schedule=schedule, value="120")
    response = operator_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk]))
    assert re.search(r'<input type="text" name="value" value="120"', response.content.decode())
    assert "The next window starts 5 (the overlap) below the mark: values above 115." in _text(response)


def test_the_confirm_page_offers_move_and_run_now_which_moves_then_queues_a_run(berlin, dated, operator):
    url = reverse("scheduler:schedule_watermark", args=[dated.pk])
    form = {"value": "2026-12-02T01:00:00", "op": "set", "reason": "reload the 1st"}
    confirm = berlin.post(url, form)
    body = confirm.content.decode()
    assert 'id="confirm-move-run"' in body and 'name="then_run" value="1"' in body
    assert "from 2026-12-02 00:00:00 CET" in _text(confirm)  # the new mark less its hour of overlap
    assert WatermarkState.objects.get(schedule=dated).value == "2026-12-03T00:00:00+00:00"  # nothing moved yet
    response = berlin.post(url, {**form, "then_run": "1"})
    run = Run.objects.get(schedule=dated)
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:run_detail", args=[run.pk])
    assert WatermarkState.objects.get(schedule=dated).value == "2026-12-02T00:00:00+00:00"
    assert run.triggered_by == operator.username
    trigger = AuditEntry.objects.get(action="run.trigger", actor=operator.username)
    assert trigger.reason == "after moving the watermark: reload the 1st" and trigger.after["run"] == run.pk


def test_move_and_run_on_a_paused_schedule_is_refused_naming_the_field_and_moves_nothing(berlin, dated):
    Schedule.objects.filter(pk=dated.pk).update(enabled=False)
    response = berlin.post(reverse("scheduler:schedule_watermark", args=[dated.pk]),
                           {"value": "2026-12-02T01:00:00", "op": "set", "reason": "reload", "then_run": "1"})
    assert response.status_code == 400 and "then_run: dated is paused" in _text(response)
    assert WatermarkState.objects.get(schedule=dated).value == "2026-12-03T00:00:00+00:00"
    assert not Run.objects.filter(schedule=dated).exists()


def test_move_and_run_needs_the_right_to_run_and_moves_nothing_without_it(client, make_user, default_team, dated):
    from django.contrib.auth.models import Permission

    user = make_user("wanda")  # may move marks, may not run
    user.user_permissions.add(*Permission.objects.filter(codename__in=["manage_watermark", "view_schedule"]))
    default_team.members.add(user)
    client.force_login(user)
    response = client.post(reverse("scheduler:schedule_watermark", args=[dated.pk]),
                           {"value": "2026-12-02T01:00:00", "op": "set", "reason": "reload", "then_run": "1"})
    assert response.status_code == 403
    assert WatermarkState.objects.get(schedule=dated).value == "2026-12-03T00:00:00+00:00"
    assert not Run.objects.filter(schedule=dated).exists()


# --- 14: the trigger's next fires where it is edited --------------------------------------------------------------

PREVIEW = reverse("scheduler:trigger_preview")


def test_the_preview_lists_the_next_fires_in_the_schedules_zone_and_utc(viewer_client):
    response = viewer_client.get(PREVIEW, {"trigger_kind": "cron", "trigger_config": '{"cron": "0 2 * * *"}',
                                           "timezone": "Europe/Berlin"}, headers={"HX-Request": "true"})
    text = _text(response)
    assert response.status_code == 200 and "the next 5 fires (Europe/Berlin · UTC)" in text
    assert len(re.findall(r"02:00:00 CET · \d{4}-\d\d-\d\d 01:00:00 UTC", text)) == 5


@pytest.mark.parametrize("kind, config, zone, said", [
    ("cron", '{"cron": "0 25 * * *"}', "UTC", "trigger_config.cron: "),
    ("cron", '{"cron": "0 2 * * *"', "UTC", "trigger_config: not valid JSON"),
    ("cron", '{"cron": "0 2 * * *"}', "Mars/Base", "timezone: unknown time zone 'Mars/Base'"),
    ("sundial", "{}", "UTC", "trigger_kind: unknown trigger plugin 'sundial'"),
    ("cron", "x" * 10_001, "UTC", "trigger_config: is longer than"),
])
def test_a_bad_trigger_is_named_by_its_field(viewer_client, kind, config, zone, said):
    query = {"trigger_kind": kind, "trigger_config": config, "timezone": zone}
    plain = viewer_client.get(PREVIEW, query)
    assert plain.status_code == 400 and said in _text(plain)
    swapped = viewer_client.get(PREVIEW, query, headers={"HX-Request": "true"})  # htmx swaps a 200 only
    assert swapped.status_code == 200 and 'id="trigger-preview-error"' in swapped.content.decode()


def test_a_trigger_without_timed_fires_says_so(viewer_client):
    response = viewer_client.get(PREVIEW, {"trigger_kind": "manual", "trigger_config": "", "timezone": "UTC"})
    assert response.status_code == 200 and "no timed fires" in _text(response)


def test_a_blank_query_is_nothing_to_preview_yet(viewer_client):
    response = viewer_client.get(PREVIEW)
    assert response.status_code == 200 and 'id="trigger-preview-blank"' in response.content.decode()


def test_the_preview_needs_a_login(client):
    response = client.get(PREVIEW, {"trigger_kind": "cron", "trigger_config": "{}", "timezone": "UTC"})
    assert response.status_code == 302 and "/accounts/login" in response["Location"]


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def test_the_admins_schedule_form_asks_the_preview_as_the_trigger_is_edited(admin_client, make_schedule):
    schedule = make_schedule("nightly", trigger_kind="cron", trigger_config={"cron": "0 2 * * *"})
    page = admin_client.get(reverse("admin:scheduler_schedule_change", args=[schedule.pk])).content.decode()
    box = re.search(r'<div id="trigger-preview"[^>]*>', page).group(0)
    assert f'hx-get="{PREVIEW}"' in box and "from:#id_trigger_config" in box
    assert 'hx-include="#id_trigger_kind, #id_trigger_config, #id_timezone"' in box
    assert page.index('name="trigger_config"') < page.index('id="trigger-preview"')  # under the field itself
    # its hashed name once `make run`'s collectstatic wrote the manifest (etlsite/static_storage.py)
    assert re.search(r"django_htmx/htmx-2\.min(\.[0-9a-f]{12})?\.js", page)


# --- 14: a user in one place; a team's channel test on its admin page ------------------------------------------


@pytest.fixture
def billing(db):
    return team_save(data={"name": "billing", "alert_channels": "json://hooks.example.com/etl"}, actor="tests")


def test_a_users_page_shows_their_teams_and_api_tokens(admin_client, make_user, billing, default_team):
    bob = make_user("bob", "operator")
    team_set_members(team=billing, add=[bob], actor="tests")
    token_create(user=bob, name="ci deploys", actor="tests")
    token = ApiToken.objects.get(user=bob)
    page = admin_client.get(reverse("admin:auth_user_change", args=[bob.pk])).content.decode()
    assert "Teams and API tokens" in page
    selected = re.findall(r'<option value="(\d+)" selected>', page[page.index('name="teams"'):])
    assert selected == [str(billing.pk)]
    assert reverse("admin:scheduler_apitoken_change", args=[token.pk]) in page and token.key_id in page
    assert f"{reverse('admin:scheduler_apitoken_changelist')}?user__id__exact={bob.pk}" in page


def test_teams_set_on_the_users_page_go_through_the_team_service_audited(admin_client, make_user, billing,
                                                                          default_team):
    bob = make_user("bob", "operator")
    team_set_members(team=billing, add=[bob], actor="tests")
    url = reverse("admin:auth_user_change", args=[bob.pk])
    form = {"username": "bob", "is_active": "on", "groups": [g.pk for g in bob.groups.all()],
            "teams": [default_team.pk], "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert set(bob.etl_teams.values_list("name", flat=True)) == {default_team.name}
    entries = AuditEntry.objects.filter(action="team.members", actor="ada")
    assert {e.target_id for e in entries} == {str(billing.pk), str(default_team.pk)}


def test_a_teams_admin_page_tests_its_channels_and_comes_back_there(admin_client, billing):
    change = reverse("admin:scheduler_team_change", args=[billing.pk])
    page = admin_client.get(change).content.decode()
    test_url = reverse("scheduler:team_channel_test", args=[billing.pk, 0])
    button = re.search(r'<button type="submit"[^>]*id="channel-test-0"[^>]*>', page).group(0)
    assert f'formaction="{test_url}"' in button and 'formmethod="post"' in button and 'value="admin"' in button
    response = admin_client.post(test_url, {"back": "admin", "name": "ignored: the admin form's own fields"})
    assert response.status_code == 302 and response["Location"] == change
    assert admin_client.post(test_url, {}).headers["Location"] == reverse("scheduler:team_detail", args=[billing.pk])
