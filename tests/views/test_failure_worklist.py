"""The overview's failure work list on the page: grouped, acknowledged with a note, filtered by team."""
from __future__ import annotations

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, FailureAck, RunStatus, Team

pytestmark = pytest.mark.django_db
URL = reverse("scheduler:overview")


def test_a_flapping_schedule_is_one_line_with_its_count_and_an_acknowledge_link(operator_client, make_schedule,
                                                                                make_run):
    schedule = make_schedule("flapping")
    for i in range(4):
        last = make_run(schedule, RunStatus.FAILED, reason=f"boom {i}")
    page = operator_client.get(URL).content.decode()
    assert page.count('data-state="open"') == 1 and "4 failures" in page and f"#{last.pk}" in page
    assert reverse("scheduler:schedule_failures", args=[schedule.pk]) in page


def test_acknowledging_with_a_note_moves_it_under_acknowledged(operator_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    failed = make_run(schedule, RunStatus.FAILED)
    url = reverse("scheduler:failure_ack", args=[schedule.pk])
    form = operator_client.get(reverse("scheduler:schedule_failures", args=[schedule.pk]))
    assert form.status_code == 200 and f'value="{failed.pk}"' in form.content.decode() and url in form.content.decode()
    response = operator_client.post(url, {"note": "vendor outage, OPS-7", "up_to": failed.pk})
    assert response.status_code == 302 and response["Location"] == URL
    page = operator_client.get(URL).content.decode()
    assert 'data-state="acknowledged"' in page and "vendor outage, OPS-7" in page and "olivia" in page
    assert 'id="no-failures"' in page


def test_a_missing_note_is_named_and_changes_nothing(operator_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    failed = make_run(schedule, RunStatus.FAILED)
    ack = reverse("scheduler:failure_ack", args=[schedule.pk])
    response = operator_client.post(ack, {"note": " ", "up_to": failed.pk})
    assert response.status_code == 400 and "note: This field is required." in response.content.decode()
    response = operator_client.post(ack, {"note": "x", "up_to": 999999})
    assert response.status_code == 400 and "run: 999999 is not a failed run of schedule" in response.content.decode()
    assert not FailureAck.objects.exists()


def test_another_teams_schedule_says_why_there_is_no_button_and_refuses_a_post(operator_client, make_schedule,
                                                                             make_run):
    theirs = make_schedule("theirs", owner=Team.objects.create(name="analytics"))
    failed = make_run(theirs, RunStatus.FAILED)
    page = operator_client.get(URL + "?team=all").content.decode()
    assert "Owned by analytics; you can view it but not act on it." in page
    assert reverse("scheduler:schedule_failures", args=[theirs.pk]) not in page
    form = operator_client.get(reverse("scheduler:schedule_failures", args=[theirs.pk])).content.decode()
    assert "Owned by analytics; you can view it but not act on it." in form and 'id="ack-form"' not in form
    response = operator_client.post(reverse("scheduler:failure_ack", args=[theirs.pk]),
                                   {"note": "x", "up_to": failed.pk})
    assert response.status_code == 403 and not FailureAck.objects.exists()
    assert AuditEntry.objects.filter(action="permission.denied", actor="olivia").exists()


def test_a_viewer_is_told_their_group_may_not_acknowledge(viewer_client, make_schedule, make_run):
    make_run(make_schedule("orders"), RunStatus.FAILED)
    page = viewer_client.get(URL).content.decode()
    assert "Your login (viewer) may view but not acknowledge the failures of schedules" in page


def test_the_team_filter_narrows_the_work_list(operator_client, make_schedule, make_run):
    make_run(make_schedule("ours"), RunStatus.FAILED)
    make_run(make_schedule("theirs", owner=Team.objects.create(name="analytics")), RunStatus.FAILED)
    assert 'data-schedule="theirs"' not in operator_client.get(URL).content.decode()  # "my teams" by default
    page = operator_client.get(URL + "?team=analytics").content.decode()
    assert 'data-schedule="theirs"' in page and 'data-schedule="ours"' not in page
