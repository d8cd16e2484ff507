"""POST /api/events/<topic>: a team's token fires only its team's schedules, and ids are per team (issue 22)."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, Event, EventToken, Run
from scheduler.services.access.event_tokens import event_token_create, event_token_revoke
from scheduler.services.admission.events import event_emit
from scheduler.services.access.teams import PermissionRefused, team_save, team_set_members

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_teams(make_schedule):
    billing = team_save(data={"name": "billing"}, actor="tests")
    shipping = team_save(data={"name": "shipping"}, actor="tests")
    config = {"topic": "orders"}
    make_schedule("bill-orders", trigger_kind="event", trigger_config=config, owner=billing)
    make_schedule("ship-orders", trigger_kind="event", trigger_config=config, owner=shipping)
    return billing, shipping


def _post(client, token, data):
    return client.post("/api/events/orders", data=json.dumps(data), content_type="application/json",
                       headers={"Authorization": f"Bearer {token}"})


def _fired(response) -> set[str]:
    return set(Run.objects.filter(pk__in=response.json()["runs"]).values_list("schedule__name", flat=True))


def test_a_team_token_fires_only_its_teams_schedules(client, two_teams):
    billing, _ = two_teams
    token = event_token_create(name="shop", team=billing, actor="tests").plaintext
    response = _post(client, token, {"id": "e1", "payload": {}})
    assert response.status_code == 202 and _fired(response) == {"bill-orders"}
    assert Event.objects.get().team == billing


def test_an_admin_wide_token_fires_every_team(client, two_teams):
    token = event_token_create(name="hub", team=None, all_teams=True, actor="tests").plaintext
    assert _fired(_post(client, token, {"id": "e1", "payload": {}})) == {"bill-orders", "ship-orders"}


def test_a_token_of_the_settings_stays_valid_and_is_admin_wide(client, two_teams, settings):
    settings.ETL_EVENT_TOKENS = ["legacy-token-1"]
    assert _fired(_post(client, "legacy-token-1", {"id": "e1", "payload": {}})) == {"bill-orders", "ship-orders"}


def test_one_team_cannot_squat_another_teams_event_id(client, two_teams):
    billing, shipping = two_teams
    bill = event_token_create(name="b", team=billing, actor="tests").plaintext
    ship = event_token_create(name="s", team=shipping, actor="tests").plaintext
    assert _post(client, bill, {"id": "order-42", "payload": {}}).status_code == 202
    response = _post(client, ship, {"id": "order-42", "payload": {}})
    assert response.status_code == 202 and not response.json()["duplicate"] and _fired(response) == {"ship-orders"}
    again = _post(client, ship, {"id": "order-42", "payload": {}})
    assert again.status_code == 200 and again.json()["duplicate"]


def test_a_revoked_or_unknown_token_is_a_401(client, two_teams):
    billing, _ = two_teams
    created = event_token_create(name="b", team=billing, actor="tests")
    event_token_revoke(token=created.token, actor="tests")
    response = _post(client, created.plaintext, {"payload": {}})
    assert response.status_code == 401 and "revoked" in response.json()["error"]
    assert _post(client, "evt_abcdefgh_" + "x" * 30, {"payload": {}}).status_code == 401
    assert not Run.objects.exists()


def test_a_user_fires_only_the_schedules_of_their_teams(two_teams, make_user):
    billing, _ = two_teams
    user = make_user("bea", "operator")
    team_set_members(team=billing, add=[user], actor="tests")
    event, runs = event_emit(topic="orders", payload={}, event_id="x", source="t", actor=user)
    assert {r.schedule.name for r in runs} == {"bill-orders"} and event.scope == f"team:{billing.pk}"


def test_a_viewer_may_not_emit_and_the_refusal_is_audited(two_teams, viewer):
    with pytest.raises(PermissionRefused):
        event_emit(topic="orders", payload={}, source="t", actor=viewer)
    assert not Event.objects.exists() and AuditEntry.objects.filter(action="permission.denied").count() == 1


def test_a_user_may_make_tokens_only_for_their_own_team(two_teams, make_user):
    billing, shipping = two_teams
    user = make_user("bea", "operator")
    team_set_members(team=billing, add=[user], actor="tests")
    assert event_token_create(name="b", team=billing, actor=user).token.team == billing
    with pytest.raises(PermissionRefused, match="shipping"):
        event_token_create(name="s", team=shipping, actor=user)
    with pytest.raises(PermissionRefused, match="admin-wide"):
        event_token_create(name="all", team=None, all_teams=True, actor=user)
    assert EventToken.objects.count() == 1


def _command(*args) -> str:
    out = StringIO()
    call_command("event_token", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_the_command_creates_lists_with_the_team_and_revokes(client, two_teams):
    token = _command("create", "--name", "shop", "--team", "billing").strip()
    assert token.startswith("evt_")
    assert _fired(_post(client, token, {"payload": {}})) == {"bill-orders"}
    _command("create", "--name", "hub", "--all-teams")
    rows = json.loads(_command("list", "--json"))
    assert {(r["name"], r["team"], r["all_teams"]) for r in rows} == {("shop", "billing", False),
                                                                      ("hub", None, True)}
    assert "billing" in _command("list") and "all teams" in _command("list")
    key_id = token.split("_")[1]
    _command("revoke", "--key-id", key_id)
    assert _post(client, token, {"payload": {}}).status_code == 401


def test_the_command_needs_exactly_one_of_team_or_all_teams(two_teams):
    with pytest.raises(CommandError, match="--team"):
        _command("create", "--name", "x")
    with pytest.raises(CommandError, match="--team"):
        _command("create", "--name", "x", "--team", "nobody")
    assert not EventToken.objects.exists()


def test_the_admin_lists_event_tokens_with_their_team(client, two_teams, make_user):
    billing, _ = two_teams
    event_token_create(name="shop", team=billing, actor="tests")
    admin = make_user("root-admin", is_staff=True, is_superuser=True)
    client.force_login(admin)
    page = client.get("/admin/scheduler/eventtoken/").content.decode()
    assert "shop" in page and "billing" in page
