"""With ETL_TEAMS_VIEW_ALL off, nothing of another team shows anywhere (issue 22).

Walk every URL pattern (pages, partials, exports, the admin, the REST API v1)
as a staff member of team A and assert that no name of team B (its schedule
names, the team's name) appears in any response, whether the page is one of
A's, a list, or B's own object refused with a 403.
"""
from __future__ import annotations

import re

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
from scheduler.models import Run
from scheduler.services.runs.end import run_finish

pytestmark = pytest.mark.django_db

SECRETS = ("zorkteam", "zorksched", "zorkupstream", "zorkflaky")
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
    # B's runs end: A's downstream runs stand for them (one triggered, one blocked by a failure), issue 33
    flaky = make_schedule("zorkflaky", owner=zork, target_id="demo.flaky", retry_max_attempts=1)
    make_schedule("alphablocked", owner=alpha, trigger_kind="upstream", depends_on=["zorkflaky"])
    flaky_run = run_trigger_manual(schedule=flaky, actor="tests", now=now)
    Run.objects.filter(pk__in=[their_run.pk, flaky_run.pk]).update(status="RUNNING", started_at=now)
    # each ends as its worker would write it (with the run's dispatch token)
    for pk, status, reason in [(their_run.pk, "SUCCEEDED", ""), (flaky_run.pk, "FAILED", "source down")]:
        ended = Run.objects.get(pk=pk)
        assert run_finish(run=ended, status=status, now=now, reason=reason, token=ended.dispatch_token)
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
        # A's runs that stand for B's: one triggered by B's success, one blocked by B's failure
        "their_runs": [their_run.pk, flaky_run.pk],
        "mine_runs": list(Run.objects.filter(schedule__owner=alpha).order_by("pk").values_list("pk", flat=True)),
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
            # B's schedule asked for by its name answers as a missing one: that echoes the name the caller sent
            found = _leaks(_body(response).replace('named \'zorksched\'', "named ..."))
            if found:
                leaks[f"{name} {url}{query} ({response.status_code})"] = found
    assert not leaks, "\n".join(f"{k}: {v}" for k, v in leaks.items())


MISSING = {"run_id": 987654, "schedule_id": 987654, "backfill_id": 987654, "object_id": "987654", "id": "987654",
           "team_id": 987654, "name": "nosuchsched"}
ADMIN_OBJECTS = {"schedule": "schedule_id", "run": "run_id", "backfill": "backfill_id", "team": "team_id"}
# what differs between any two answers: CSRF tokens, and the messages an earlier answer (a redirect) left for this one
TOKENS = re.compile(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]+|<ul class="messages">.*?</ul>', re.S)


def _ids_for(name: str, keys: set[str], ids: dict) -> dict | None:
    """B's ids for a URL pattern, or None for a pattern that names none of B's objects (admin pages of other models,
    which share the object_id keyword)."""
    if name.startswith("admin:"):
        model = name.split("_")[1] if name.startswith("admin:scheduler_") else ""
        if "object_id" in keys and model not in ADMIN_OBJECTS:
            return None
        ids = {**ids, "object_id": str(ids[ADMIN_OBJECTS[model]])} if "object_id" in keys else ids
    return {key: ids.get(key, "zorksched") for key in keys}


def test_another_teams_object_answers_as_a_missing_one_does(client, scoped):
    """Issue 33: every URL naming B's schedule, run, backfill or team answers A as for an id that does not exist
    (status, and body but for the id), to GET and to POST, on the pages, the admin and the REST API."""
    client.force_login(scoped["alice"])
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {token_create(user=scoped['alice'], name='walk').plaintext}"}
    differ, compared = {}, 0
    for pattern, namespace, name in _walk():
        keys = set(pattern.pattern.regex.groupindex)
        if name is None or not keys & set(MISSING) or name in OWN_CREDENTIALS | AUTH_PAGES | {"scheduler:webhook"}:
            continue
        theirs = _ids_for(name, keys, scoped["ids"])
        if theirs is None:
            continue
        missing = {**theirs, **{key: MISSING[key] for key in keys & set(MISSING)}}
        try:
            urls = reverse(name, kwargs=theirs), reverse(name, kwargs=missing)
        except Exception:  # a converter that wants another shape
            continue
        api = namespace == "api-v1:"
        for method in ("get", "post"):
            extra = {**bearer, "content_type": "application/json", "data": "{}"} if api and method == "post" else \
                bearer if api else {}
            answers = [getattr(client, method)(url, **extra) for url in urls]
            compared += 1
            bodies = [TOKENS.sub(r"\1", _body(a)) for a in answers]
            for key in keys & set(MISSING):
                bodies[1] = bodies[1].replace(str(MISSING[key]), str(theirs[key]))
            shown = [(a.status_code, a.get("Location", "").replace("987654", "?")) for a in answers]
            if shown[0] != shown[1] or (answers[0].status_code >= 400 and bodies[0] != bodies[1]):
                differ[f"{method.upper()} {urls[0]}"] = (shown, bodies[0][-300:], bodies[1][-300:])
    assert compared > 40 and not differ, "\n".join(f"{k}: {v}" for k, v in differ.items())


def _run_id_leaks(text: str, their_runs: list[int]) -> list[str]:
    marks = [f"{kind}:{pk}" for pk in their_runs for kind in ("upstream", "blocked")]
    marks += [f"(run {pk})" for pk in their_runs] + [f"/runs/{pk}/" for pk in their_runs]
    marks += [f"#{pk}<" for pk in their_runs] + [f"run {pk} " for pk in their_runs]
    return [mark for mark in marks if mark in text]


def test_ones_own_runs_that_stand_for_another_teams_show_it_as_a_schedule_of_another_team(client, scoped):
    """Issue 33: no name, no run id, no status of B's upstream on A's run pages, lists, the admin and the API."""
    client.force_login(scoped["alice"])
    token = token_create(user=scoped["alice"], name="walk").plaintext
    assert len(scoped["mine_runs"]) == 3  # triggered by B's run, blocked by B's failure, and one that waits for B
    leaks = {}
    for run_id in scoped["mine_runs"]:
        urls = [reverse("scheduler:run_detail", args=[run_id]), reverse("scheduler:run_log", args=[run_id]),
                reverse("scheduler:runs"), reverse("scheduler:blocked"), reverse("scheduler:overview"),
                reverse("scheduler:timeline"), reverse("scheduler:schedule_detail", args=[scoped["mine"].pk]),
                f"/api/v1/runs/{run_id}", "/api/v1/runs", "/api/v1/runs?status=BLOCKED", "/api/status",
                reverse("admin:scheduler_run_change", args=[run_id]), reverse("admin:scheduler_run_changelist")]
        for url in urls:
            for extra in ({}, {"HTTP_HX_REQUEST": "true"}, {"HTTP_AUTHORIZATION": f"Bearer {token}"}):
                response = client.get(url, **extra)
                assert response.status_code == 200, (url, response.status_code)
                text = _body(response)
                found = _leaks(text) + _run_id_leaks(text, scoped["their_runs"])
                if found:
                    leaks[f"{url} {sorted(extra)}"] = found
    assert not leaks, "\n".join(f"{k}: {v}" for k, v in leaks.items())
    page = _body(client.get(reverse("scheduler:run_detail", args=[scoped["mine_runs"][0]])))
    upstreams = page.split('id="upstream-runs"')[1].split("</section>")[0]
    assert "a schedule of another team" in upstreams and "SUCCEEDED" not in upstreams and "FAILED" not in upstreams
    # the search of the admin's run list cannot test a name against the reasons either
    assert "alphablocked" not in _body(client.get(reverse("admin:scheduler_run_changelist") + "?q=zorkflaky"))


def test_the_status_endpoint_lists_only_the_active_runs_one_may_see(client, scoped):
    Run.objects.filter(schedule__name="zorksched").update(status="RUNNING")
    client.force_login(scoped["alice"])
    assert "zorksched" not in _body(client.get("/api/status"))
