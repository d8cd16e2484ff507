"""The schedules list in pages: bounded in rows, bytes and queries whatever the number of schedules (issue 25)."""
from __future__ import annotations

import re
from itertools import count
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from scheduler.models import Run, RunStatus, Schedule, TriggerKind
from scheduler.selectors import STRIP_LENGTH
from scheduler.views import schedules as schedules_view

_keys = count(1)
ROW = re.compile(r'<tr data-schedule="([^"]+)"')


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


@pytest.fixture
def fleet(make_schedule, now):
    """fleet(n): n hourly cron schedules, each with a full strip of runs (a failure among them)."""

    def make(n: int) -> list[str]:
        first = make_schedule("feed-0000", trigger_kind="cron", trigger_config={"cron": "0 * * * *"})
        clones = []
        for i in range(1, n):
            clone = Schedule.objects.get(pk=first.pk)
            clone.pk, clone.name = None, f"feed-{i:04d}"
            clones.append(clone)
        Schedule.objects.bulk_create(clones)
        Run.objects.bulk_create([
            Run(schedule=s, trigger_kind=TriggerKind.MANUAL, trigger_key=f"f{next(_keys)}",
                workload_class_id=s.workload_class_id, queued_at=now, started_at=now, finished_at=now,
                status=RunStatus.FAILED if k == 3 else RunStatus.SUCCEEDED)
            for s in Schedule.objects.all() for k in range(STRIP_LENGTH)
        ])
        return sorted(Schedule.objects.values_list("name", flat=True))

    return make


def test_a_page_of_300_schedules_is_under_100_kb_with_at_most_a_page_of_rows_and_a_next_page(admin_client, fleet):
    fleet(300)
    response = admin_client.get(reverse("scheduler:schedules"), {"team": "all"})
    page = response.content.decode()
    assert len(response.content) <= 100_000, len(response.content)
    assert ROW.findall(page) == [f"feed-{i:04d}" for i in range(schedules_view.PAGE_SIZE)]
    assert f'href="?team=all&amp;after=feed-{schedules_view.PAGE_SIZE - 1:04d}"\n     id="next"' in page
    assert 'id="previous"' not in page
    assert page.count('class="tick t-failed"') == schedules_view.PAGE_SIZE  # the strip is still drawn


def test_next_and_previous_walk_every_schedule_once_keeping_the_team_filter(admin_client, fleet):
    names = fleet(60)
    seen, url = [], reverse("scheduler:schedules") + "?team=all"
    while url:
        page = admin_client.get(url).content.decode()
        seen += ROW.findall(page)
        found = re.search(r'href="(\?[^"]+)"\s+id="next"', page)
        url = reverse("scheduler:schedules") + found.group(1).replace("&amp;", "&") if found else None
        assert url is None or "team=all" in url
    assert seen == names
    back = re.search(r'href="(\?[^"]+)"\s+id="previous"', page).group(1).replace("&amp;", "&")
    previous = admin_client.get(reverse("scheduler:schedules") + back).content.decode()
    size = schedules_view.PAGE_SIZE
    last_start = (len(names) - 1) // size * size
    assert ROW.findall(previous) == names[last_start - size:last_start]
    assert 'id="next"' in previous


def _queries(client, size: int) -> int:
    with mock.patch.object(schedules_view, "PAGE_SIZE", size), CaptureQueriesContext(connection) as captured:
        page = client.get(reverse("scheduler:schedules"), {"team": "all"}).content.decode()
    assert len(ROW.findall(page)) == size
    return len(captured)


def test_the_query_count_does_not_grow_with_the_page_size(admin_client, fleet):
    fleet(30)
    _queries(admin_client, 2)  # warm-up: a first request does one-off work
    assert _queries(admin_client, 25) == _queries(admin_client, 2)


@pytest.mark.parametrize("query, error", [
    ({"after": "no spaces"}, "after: must be a schedule name (letters, digits, - and _), got &#x27;no spaces&#x27;"),
    ({"after": "feed-0001", "before": "feed-0009"}, "after, before: give one of them, not both"),
])
def test_a_bad_cursor_is_named_and_the_first_page_shown(admin_client, fleet, query, error):
    fleet(30)
    page = admin_client.get(reverse("scheduler:schedules"), {"team": "all", **query}).content.decode()
    assert error in page
    assert ROW.findall(page)[0] == "feed-0000"
