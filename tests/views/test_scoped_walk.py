"""With ETL_TEAMS_VIEW_ALL off, nothing of another team shows anywhere (issue 22).

Walk every URL pattern (pages, partials, exports, the admin, the REST API v1)
as a staff member of team A and assert that no name of team B (its schedule
names, the team's name) appears in any response, whether the page is one of
A's, a list, or B's own object refused with a 403.
"""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from scheduler.models import BackfillWindow
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.admission.events import event_emit
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.access.teams import authorize, PermissionRefused, team_save, team_set_members
from scheduler.services.access.tokens import token_create
from tests.views.test_permissions import OWN_CREDENTIALS, AUTH_PAGES, _walk

pytestmark = pytest.mark.django_db

SECRETS = ("zorkteam", "zorksched", "zorkupstream")
WM = {"type": "integer", "column": "id", "initial": 0}


@pytest.fixture
def scoped(make_schedule, make_user, now, settings):
    """Team A (alpha) with alice, a staff operator; team B (zorkteam) with its schedules, runs, backfill, events."""
    settings.ETL_TEAMS_VIEW_ALL = False
    alpha = team_save(data={"name": "alpha"}, actor="tests")
    zork = team_save(data={"name": "zorkteam"}, actor="tests")
    alice = make_user("alice", "operator", is_staff=True)
    alice.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="scheduler", codename__startswith="view_"))
    team_set_members(team=alpha, add=[alice], actor="tests")
    upstream = make_schedule("zorkupstream", owner=zork, watermark_config=WM)
    theirs = make_schedule("zorksched", owner=zork, trigger_kind="event", trigger_config={"topic": "orders"})
    mine = make_schedule("alphasched", owner=alpha, trigger_kind="upstream", depends_on=["zorkupstream"])
    their_run = run_trigger_manual(schedule=upstream, actor="tests", now=now)
    run_trigger_manual(schedule=mine, actor="tests", now=now)
    backfill = backfill_submit(schedule=upstream, start="0", end="20", window="10", reason="r", requested_by="tests")
    BackfillWindow.objects.filter(backfill=backfill).update(status="FAILED")
    event_emit(topic="orders", payload={}, event_id="e1", source="tests", actor="tests")
    zork_member = make_user("zed", "operator")
    team_set_members(team=zork, add=[zork_member], actor="tests")
    with pytest.raises(PermissionRefused):  # B's member refused on A's schedule: an audit entry naming zed
        authorize(actor=zork_member, perm="scheduler.trigger_schedule", obj=mine)
    return {
        "alice": alice,
        "ids": {
            "run_id": their_run.pk, "schedule_id": theirs.pk, "backfill_id": backfill.pk, "topic": "orders",
            "name": "zorksched", "app_label": "scheduler", "object_id": str(theirs.pk), "content_type_id": 1,
            "url": "nowhere/", "id": str(theirs.pk), "key_id": "nosuchkey", "team_id": zork.pk, "index": 0,
        },
        "mine": mine,
    }


def _leaks(text: str) -> list[str]:
    return [name for name in SECRETS if name in text]


def _urls(ids: dict) -> list[tuple[str, str]]:
    found = []
    for pattern, namespace, name in _walk():
        if name is None or namespace == "api-v1:" or name == "api_v1_not_found":  # the REST API: walked below
            continue
        kwargs = {key: ids.get(key, "zorksched") for key in pattern.pattern.regex.groupindex}
        found.append((name, reverse(name, kwargs=kwargs)))
    return found


def _body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode("utf-8", "replace")
    return response.content.decode("utf-8", "replace")


def test_walking_every_page_as_team_a_shows_nothing_of_team_b(client, scoped):
    client.force_login(scoped["alice"])
    leaks = {}
    for name, url in _urls(scoped["ids"]):
        if name in OWN_CREDENTIALS | AUTH_PAGES:
            continue
        # the page and its htmx partial (a filter by B's name would only echo the caller's own text)
        for query, extra in (("", {}), ("", {"HTTP_HX_REQUEST": "true"})):
            response = client.get(url + query, **extra)
            found = _leaks(_body(response))
            if found:
                leaks[f"{name} {url}{query} ({response.status_code})"] = found
    assert not leaks, "\n".join(f"{k}: {v}" for k, v in leaks.items())


def test_a_page_of_ones_own_team_names_another_teams_upstream_only_as_hidden(client, scoped):
    client.force_login(scoped["alice"])
    page = _body(client.get(reverse("scheduler:schedule_detail", args=[scoped["mine"].pk])))
    assert "alphasched" in page and not _leaks(page)


def test_the_rest_api_lists_show_nothing_of_team_b(client, scoped):
    token = token_create(user=scoped["alice"], name="walk").plaintext
    headers = {"Authorization": f"Bearer {token}"}
    leaks = {}
    for pattern, namespace, name in _walk():
        if namespace != "api-v1:" or name is None:
            continue
        kwargs = {key: scoped["ids"].get(key, "zorksched") for key in pattern.pattern.regex.groupindex}
        try:
            url = reverse(name, kwargs=kwargs)
        except Exception:  # a converter that wants another shape: walked with the schedule's name
            continue
        for query in ("", "?team=nosuch"):  # an unknown team's error lists only the teams one may see
            response = client.get(url + query, headers=headers)
            found = _leaks(_body(response))
            if found:
                leaks[f"{name} {url}{query} ({response.status_code})"] = found
    assert not leaks, "\n".join(f"{k}: {v}" for k, v in leaks.items())
