"""Values that would overflow are refused at the API door too (issue 21, point 6): problem+json, 422, naming the
field and the largest value allowed; nothing changes."""
import pytest

from scheduler.core.limits import LATEST, MAX_SECONDS
from scheduler.models import AuditEntry, Backfill, Schedule, WatermarkState
from tests.api.conftest import problem_of

WM = {"type": "datetime", "column": "updated_at", "initial": "2026-01-01T00:00:00+00:00"}
INT_WM = {"type": "integer", "column": "id", "initial": 0}
NEAR_MAX = "9999-12-31T00:00:00+00:00"
BIG_DELAY = 1e20


def _names(body: dict, field: str, largest: str) -> None:
    messages = {e["field"]: e["message"] for e in body.get("errors") or []}
    assert field in messages, body
    assert largest in messages[field] and "allowed" in messages[field], body


def test_a_watermark_set_near_the_end_of_the_calendar_is_refused(api, op_token, make_schedule):
    make_schedule("orders", watermark_config=WM)
    body = problem_of(api.put("/schedules/orders/watermark", {"value": NEAR_MAX, "reason": "far", "force": True},
                              token=op_token), 422)
    _names(body, "value", LATEST.isoformat())
    assert not WatermarkState.objects.exclude(value="").exists()
    assert not AuditEntry.objects.filter(action__startswith="watermark.").exists()


@pytest.mark.parametrize("change, field, largest", [
    ({"from": "9999-12-30T00:00:00+00:00", "to": NEAR_MAX}, "from", LATEST.isoformat()),
    ({"to": NEAR_MAX}, "to", LATEST.isoformat()),
    ({"window": BIG_DELAY}, "window", str(MAX_SECONDS)),
])
@pytest.mark.parametrize("preview", [True, False])
def test_a_backfill_that_would_overflow_is_refused(api, op_token, make_schedule, change, field, largest, preview):
    make_schedule("orders", watermark_config=WM)
    body = {"schedule": "orders", "from": "2026-01-01T00:00:00+00:00", "to": "2026-01-04T00:00:00+00:00",
            "window": 86400, "reason": "replay", "preview": preview, **change}
    _names(problem_of(api.post("/backfills", body, token=op_token), 422), field, largest)
    assert not Backfill.objects.exists()


OVERFLOWING = [
    ({"retry_initial_delay": BIG_DELAY}, "retry_initial_delay", str(MAX_SECONDS)),
    ({"retry_max_delay": BIG_DELAY}, "retry_max_delay", str(MAX_SECONDS)),
    ({"trigger_kind": "interval", "trigger_config": {"seconds": BIG_DELAY}}, "trigger_config.seconds", "316224000"),
    ({"trigger_kind": "interval", "trigger_config": {"seconds": 60, "anchor": "9999-12-31T23:59:59-05:00"}},
     "trigger_config.anchor", LATEST.isoformat()),
    ({"watermark_config": {**WM, "initial": NEAR_MAX}}, "watermark_config.initial", LATEST.isoformat()),
    ({"watermark_config": {**WM, "until": "9999-12-31T23:59:59-05:00"}}, "watermark_config.until",
     LATEST.isoformat()),
    ({"watermark_config": {**WM, "max_window": BIG_DELAY}}, "watermark_config.max_window", str(MAX_SECONDS)),
    ({"watermark_config": {**WM, "lag": BIG_DELAY}}, "watermark_config.lag", str(MAX_SECONDS)),
]


@pytest.mark.parametrize("change, field, largest", OVERFLOWING)
def test_a_schedule_created_with_a_value_that_would_overflow_is_refused(api, admin_token, change, field, largest):
    body = {"name": "big", "target_id": "demo.noop", "trigger_kind": "manual", "reason": "new", **change}
    _names(problem_of(api.post("/schedules", body, token=admin_token), 422), field, largest)
    assert not Schedule.objects.filter(name="big").exists()


@pytest.mark.parametrize("change, field, largest", OVERFLOWING)
def test_a_schedule_updated_with_a_value_that_would_overflow_is_refused(api, admin_token, make_schedule, change,
                                                                        field, largest):
    made = make_schedule("big", watermark_config=WM)
    before = {f.attname: getattr(made, f.attname) for f in Schedule._meta.concrete_fields if f.attname != "updated_at"}
    _names(problem_of(api.patch("/schedules/big", {**change, "reason": "edit"}, token=admin_token), 422), field,
           largest)
    after = Schedule.objects.get(pk=made.pk)
    assert {name: getattr(after, name) for name in before} == before, "nothing changed"
