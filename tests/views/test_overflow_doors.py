"""Values that would overflow are refused at the page forms and in the admin (issue 21, point 6): the error sits
under the field, names the largest value allowed, and nothing changes."""
from __future__ import annotations

import pytest
from django.urls import reverse

from scheduler.core.limits import LATEST, MAX_SECONDS
from scheduler.models import AuditEntry, Backfill, Schedule, WatermarkState
from tests.views.test_admin import ADD, _form

WM = {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00"}
NEAR_MAX = "9999-12-31T00:00:00+00:00"


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def _says(errors, field: str, largest: str) -> None:
    text = " ".join(errors.get(field, []))
    assert largest in text and "allowed" in text, dict(errors)


# --- the pages ------------------------------------------------------------------------------

def test_the_watermark_page_refuses_a_mark_near_the_end_of_the_calendar_even_forced(operator_client, make_schedule):
    schedule = make_schedule("dated", watermark_config=WM)
    response = operator_client.post(reverse("scheduler:schedule_watermark", args=[schedule.pk]),
                                    {"value": NEAR_MAX, "op": "set", "reason": "far", "force": "on"})
    assert response.status_code == 400
    _says(response.context["watermark_form"].errors, "value", LATEST.isoformat())
    assert not WatermarkState.objects.filter(schedule=schedule).exclude(value="").exists()
    assert not AuditEntry.objects.filter(action__startswith="watermark.").exists()


@pytest.mark.parametrize("overrides, field, largest", [
    ({"range_from": "9999-12-30T00:00:00+00:00", "range_to": NEAR_MAX}, "range_from", LATEST.isoformat()),
    ({"range_to": NEAR_MAX}, "range_to", LATEST.isoformat()),
    ({"window_size": "1e20"}, "window_size", str(MAX_SECONDS)),
])
def test_the_backfill_page_refuses_bounds_and_windows_that_would_overflow(operator_client, make_schedule, overrides,
                                                                          field, largest):
    make_schedule("dated", watermark_config=WM)
    data = {"schedule": "dated", "range_from": "2026-01-01T00:00:00+00:00", "range_to": "2026-01-04T00:00:00+00:00",
            "window_size": "86400", "max_parallel": "1", "reason": "replay", **overrides}
    response = operator_client.post(reverse("scheduler:backfill_submit"), data)
    assert response.status_code == 400
    _says(response.context["form"].errors, field, largest)
    assert not Backfill.objects.exists()


# --- the admin ------------------------------------------------------------------------------

OVERFLOWING = [
    ({"retry_initial_delay": "1e20"}, "retry_initial_delay", str(MAX_SECONDS)),
    ({"retry_max_delay": "1e20"}, "retry_max_delay", str(MAX_SECONDS)),
    ({"trigger_kind": "interval", "trigger_config": {"seconds": 1e20}}, "trigger_config", "316224000"),
    ({"trigger_kind": "interval", "trigger_config": {"seconds": 60, "anchor": "9999-12-31T23:59:59-05:00"}},
     "trigger_config", LATEST.isoformat()),
    ({"watermark_config": {**WM, "initial": NEAR_MAX}}, "watermark_config", LATEST.isoformat()),
    ({"watermark_config": {**WM, "until": "9999-12-31T23:59:59-05:00"}}, "watermark_config", LATEST.isoformat()),
    ({"watermark_config": {**WM, "max_window": 1e20}}, "watermark_config", str(MAX_SECONDS)),
]


@pytest.mark.parametrize("overrides, field, largest", OVERFLOWING)
def test_the_admin_refuses_a_new_schedule_with_a_value_that_would_overflow(admin_client, standard_class, overrides,
                                                                           field, largest):
    response = admin_client.post(ADD, _form(standard_class, **overrides))
    assert response.status_code == 200
    _says(response.context["adminform"].form.errors, field, largest)
    assert not Schedule.objects.filter(name="orders").exists()


@pytest.mark.parametrize("overrides, field, largest", OVERFLOWING)
def test_the_admin_refuses_a_change_that_would_overflow(admin_client, standard_class, make_schedule, overrides,
                                                        field, largest):
    made = make_schedule("orders", watermark_config=WM)
    before = {f.attname: getattr(made, f.attname) for f in Schedule._meta.concrete_fields if f.attname != "updated_at"}
    url = reverse("admin:scheduler_schedule_change", args=[made.pk])
    response = admin_client.post(url, _form(standard_class, **{"watermark_config": WM, **overrides}))
    assert response.status_code == 200
    _says(response.context["adminform"].form.errors, field, largest)
    after = Schedule.objects.get(pk=made.pk)
    assert {name: getattr(after, name) for name in before} == before, "nothing changed"


def test_the_admin_refuses_a_watermark_near_the_end_of_the_calendar(admin_client, make_schedule):
    schedule = make_schedule("dated", watermark_config=WM)
    WatermarkState.objects.create(schedule=schedule, value="2026-02-01T00:00:00+00:00")
    url = reverse("admin:scheduler_watermarkstate_change", args=[schedule.pk])
    response = admin_client.post(url, {"value": NEAR_MAX, "reason": "far", "force": "on"})
    assert response.status_code == 200
    _says(response.context["adminform"].form.errors, "value", LATEST.isoformat())
    assert WatermarkState.objects.get(schedule=schedule).value == "2026-02-01T00:00:00+00:00"
    assert not AuditEntry.objects.filter(action__startswith="watermark.").exists()

