"""/api/v1/schedules in keyset pages by name: a bounded page, a constant number of queries (issue 25)."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Schedule
from tests.api.conftest import problem_of


@pytest.fixture
def many(make_schedule, team_b):
    """make(n): n schedules, each depending on the one before, every third owned by another team."""

    def make(n: int) -> list[str]:
        names = []
        for i in range(n):
            fields = {"owner": team_b.name} if i % 3 == 2 else {}
            if names:
                fields["depends_on"] = [names[-1]]
            names.append(make_schedule(f"feed-{i:03d}", **fields).name)
        return names

    return make


def _queries(api, token, **params) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = api.get("/schedules", token=token, **params)
    assert response.status_code == 200, response.content[:300]
    return len(captured)


@pytest.mark.parametrize("view_all", [True, False])
def test_the_query_count_does_not_grow_with_the_number_of_schedules(api, op_token, many, settings, view_all):
    """Viewing scoped or not (another team's upstreams unnamed): 3 schedules or 40 cost the same queries."""
    settings.ETL_TEAMS_VIEW_ALL = view_all
    many(3)
    _queries(api, op_token)  # warm-up: a first call does one-off work; the steady state is compared
    few = _queries(api, op_token)
    Schedule.objects.all().delete()
    many(40)
    assert _queries(api, op_token) == few


def test_next_walks_every_schedule_exactly_once(api, admin_token, many):
    names = sorted(many(23))
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 5} | ({"cursor": cursor} if cursor else {})
        body = api.get("/schedules", token=admin_token, **params).json()
        assert len(body["items"]) <= 5
        seen += [s["name"] for s in body["items"]]
        pages += 1
        cursor = body["next"]
        if cursor is None:
            break
    assert seen == names and pages == 5


def test_a_page_holds_at_most_limit_schedules_and_the_filters_apply_across_pages(api, admin_token, many):
    many(12)
    Schedule.objects.filter(name__in=["feed-001", "feed-004", "feed-007", "feed-010"]).update(enabled=False)
    first = api.get("/schedules", token=admin_token, enabled="false", limit=3).json()
    assert [s["name"] for s in first["items"]] == ["feed-001", "feed-004", "feed-007"]
    rest = api.get("/schedules", token=admin_token, enabled="false", limit=3, cursor=first["next"]).json()
    assert rest == {"items": rest["items"], "next": None} and [s["name"] for s in rest["items"]] == ["feed-010"]
    assert len(api.get("/schedules", token=admin_token).json()["items"]) == 12  # default 50


def test_the_upstreams_of_another_team_stay_unnamed_in_a_page(api, op_token, many, settings):
    settings.ETL_TEAMS_VIEW_ALL = False
    many(5)
    items = {s["name"]: s for s in api.get("/schedules", token=op_token).json()["items"]}
    assert "feed-002" not in items
    assert items["feed-003"]["spec"]["depends_on"] == ["(a schedule of another team)"]
    assert items["feed-001"]["spec"]["depends_on"] == ["feed-000"]


@pytest.mark.parametrize("params, field", [({"limit": 201}, "limit"), ({"limit": 0}, "limit"),
                                           ({"cursor": "no spaces"}, "cursor"), ({"cursor": "x" * 101}, "cursor")])
def test_a_bad_limit_or_cursor_is_refused_naming_it(api, admin_token, params, field):
    body = problem_of(api.get("/schedules", token=admin_token, **params), 422)
    assert body["errors"][0]["field"] == field
