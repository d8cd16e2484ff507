"""Every dashboard list has a team filter; a team member sees "my teams" by default (issue 14)."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import reverse

from scheduler.models import BreakerStatus, Backfill, RunStatus, Schedule, Team

LISTS = ["scheduler:overview", "scheduler:runs", "scheduler:schedules", "scheduler:blocked"]


@pytest.fixture
def two_teams(make_schedule, make_run, default_team):
    payments = Team.objects.create(name="payments")
    ours = make_schedule("ours-orders")
    theirs = make_schedule("theirs-ledger")
    Schedule.objects.filter(pk=theirs.pk).update(owner=payments)
    for schedule in (ours, theirs):
        make_run(schedule, RunStatus.FAILED, reason=f"{schedule.name} broke")
        make_run(schedule, RunStatus.BLOCKED, reason=f"{schedule.name} blocked")
        make_run(schedule, RunStatus.RUNNING)
    Schedule.objects.filter(pk__in=[ours.pk, theirs.pk]).update(breaker_status=BreakerStatus.OPEN, breaker_failures=3)
    return ours, theirs, payments


def names(page: str) -> set[str]:
    """The two schedules' names shown on the page, leaving out the filters' drop-down options."""
    page = re.sub(r"<select.*?</select>", "", page, flags=re.S)
    return {name for name in ("ours-orders", "theirs-ledger") if name in page}


@pytest.mark.parametrize("url", LISTS)
def test_a_team_member_sees_their_own_teams_by_default(operator_client, two_teams, url):
    page = operator_client.get(reverse(url)).content.decode()
    assert names(page) == {"ours-orders"}
    assert 'name="team"' in page and '<option value="mine" selected>' in page


@pytest.mark.parametrize("url", LISTS)
def test_all_teams_and_one_named_team_can_be_picked(operator_client, two_teams, url):
    assert names(operator_client.get(reverse(url), {"team": "all"}).content.decode()) == {
        "ours-orders",
        "theirs-ledger",
    }
    page = operator_client.get(reverse(url), {"team": "payments"}).content.decode()
    assert names(page) == {"theirs-ledger"}
    assert '<option value="payments" selected>' in page


def test_a_viewer_in_no_team_sees_every_team_by_default(viewer_client, two_teams):
    page = viewer_client.get(reverse("scheduler:runs")).content.decode()
    assert names(page) == {"ours-orders", "theirs-ledger"}
    assert '<option value="all" selected>' in page


def test_an_unknown_team_is_named_in_the_message_and_shows_every_team(operator_client, two_teams):
    page = operator_client.get(reverse("scheduler:runs"), {"team": "nope"}).content.decode()
    assert "team: no team named &#x27;nope&#x27;" in page
    assert names(page) == {"ours-orders", "theirs-ledger"}


def test_needs_attention_is_per_team(operator_client, two_teams):
    attention = operator_client.get(reverse("scheduler:overview")).context["attention"]
    assert {item["title"] for item in attention if item["kind"] == "breaker"} == {"ours-orders"}


def test_the_runs_filter_keeps_the_team_next_to_other_filters(operator_client, two_teams):
    page = operator_client.get(reverse("scheduler:runs"), {"team": "payments", "status": "FAILED"}).content.decode()
    assert "theirs-ledger broke" in page and names(page) == {"theirs-ledger"}


@override_settings(ETL_TEAMS_VIEW_ALL=False)
def test_with_view_all_off_other_teams_never_show_in_lists(operator_client, two_teams):
    for url in LISTS + ["scheduler:timeline"]:
        page = operator_client.get(reverse(url), {"team": "all"}).content.decode()
        assert "theirs-ledger" not in names(page), url
        assert "payments" not in page, url


def test_backfills_are_filtered_by_their_schedule_team(operator_client, two_teams, now):
    ours, theirs, _ = two_teams
    for schedule in (ours, theirs):
        Backfill.objects.create(schedule=schedule, range_from="1", range_to="2", window_size="1", created_at=now,
                                total_windows=1, reason=f"{schedule.name} fill")
    page = operator_client.get(reverse("scheduler:backfills")).content.decode()
    assert "ours-orders fill" in page and "theirs-ledger fill" not in page


def test_the_timeline_draws_only_the_picked_teams(operator_client, two_teams, make_run):
    from django.utils import timezone

    ours, theirs, _ = two_teams
    now = timezone.now()
    for schedule in (ours, theirs):
        make_run(schedule, RunStatus.SUCCEEDED, queued_at=now, started_at=now, finished_at=now)

    def rows(**query):
        return {row.label for row in operator_client.get(reverse("scheduler:timeline"), query).context["chart"].rows}

    assert rows() == {"ours-orders"}
    assert rows(team="all") == {"ours-orders", "theirs-ledger"}
    assert rows(team="payments") == {"theirs-ledger"}
