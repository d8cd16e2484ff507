"""API v1: a schedule's retention_days is read, set and refused with the field named."""
import pytest

from scheduler.models import Schedule
from tests.api.conftest import problem_of


def test_retention_days_through_the_api(api, admin_token):
    r = api.post("/schedules", {"name": "made", "target_id": "demo.noop", "trigger_kind": "manual",
                                "retention_days": 30, "reason": "new"}, token=admin_token)
    assert r.status_code == 201, r.content
    assert r.json()["spec"]["retention_days"] == 30
    r = api.patch("/schedules/made", {"retention_days": None}, token=admin_token)
    assert r.status_code == 200 and r.json()["spec"]["retention_days"] is None


@pytest.mark.parametrize("value", [0, -1, 36501])
def test_a_bad_retention_days_is_a_422_naming_it_and_changes_nothing(api, admin_token, make_schedule, value):
    make_schedule("made", retention_days=30)
    body = problem_of(api.patch("/schedules/made", {"retention_days": value}, token=admin_token), 422)
    assert body["errors"][0]["field"] == "retention_days"
    assert Schedule.objects.get(name="made").retention_days == 30
