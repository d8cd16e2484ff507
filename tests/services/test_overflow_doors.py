"""Values that would overflow are refused where they enter (issue 21, point 6): the message names the field and
the largest value allowed, and nothing changes."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.core.limits import LATEST, MAX_SECONDS
from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Backfill, Schedule
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.runs.watermarks import watermark_set, watermark_state

pytestmark = pytest.mark.django_db
NEAR_MAX = "9999-12-31T00:00:00+00:00"


@pytest.fixture
def dated(make_schedule):
    return make_schedule("dated", watermark_config={"type": "datetime", "column": "ts",
                                                    "initial": "2026-01-01T00:00:00+00:00"})


def _refused(call, field: str, largest: str):
    with pytest.raises(ServiceError) as info:
        call()
    assert info.value.field == field, info.value
    assert largest in str(info.value) and "allowed" in str(info.value), str(info.value)


@pytest.mark.parametrize("data, field, largest", [
    ({"retry_initial_delay": 1e20}, "retry_initial_delay", str(MAX_SECONDS)),
    ({"retry_max_delay": 1e20}, "retry_max_delay", str(MAX_SECONDS)),
    ({"watermark_config": {"type": "datetime", "column": "ts", "initial": NEAR_MAX}},
     "watermark_config.initial", LATEST.isoformat()),
    ({"watermark_config": {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00",
                           "until": "9999-12-31T23:59:59-05:00"}}, "watermark_config.until", LATEST.isoformat()),
    ({"watermark_config": {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00",
                           "max_window": 1e20}}, "watermark_config.max_window", str(MAX_SECONDS)),
    ({"watermark_config": {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00",
                           "lag": 1e12}}, "watermark_config.lag", str(MAX_SECONDS)),
    ({"trigger_kind": "interval", "trigger_config": {"seconds": 60, "anchor": "9999-12-31T23:59:59-05:00"}},
     "trigger_config.anchor", LATEST.isoformat()),
])
def test_a_schedule_with_a_value_that_would_overflow_is_refused(data, field, largest):
    _refused(lambda: schedule_save(data={"name": "big", "target_id": "demo.noop", "trigger_kind": "manual", **data},
                                   actor="tests"), field, largest)
    assert not Schedule.objects.filter(name="big").exists()


def test_a_watermark_set_near_the_end_of_the_calendar_is_refused_even_forced(dated):
    _refused(lambda: watermark_set(schedule=dated, value=NEAR_MAX, actor="tests", reason="far", force=True),
             "value", LATEST.isoformat())
    assert watermark_state(dated).value is None
    assert not AuditEntry.objects.filter(action__startswith="watermark.").exists()


@pytest.mark.parametrize("start, end, window, field, largest", [
    ("9999-12-30T00:00:00+00:00", NEAR_MAX, 86400, "from", LATEST.isoformat()),
    ("2026-01-01T00:00:00+00:00", NEAR_MAX, 86400, "to", LATEST.isoformat()),
    ("2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", 1e20, "window", str(MAX_SECONDS)),
])
def test_a_backfill_bound_or_window_that_would_overflow_is_refused(dated, start, end, window, field, largest):
    _refused(lambda: backfill_submit(schedule=dated, start=start, end=end, window=window, reason="old",
                                     requested_by="tests"), field, largest)
    assert not Backfill.objects.exists()


def test_the_watermark_command_refuses_it_naming_the_field(dated):
    with pytest.raises(CommandError) as info:
        call_command("watermark", "dated", "--set", NEAR_MAX, "--force", "--reason", "far", stdout=StringIO())
    assert "value" in str(info.value) and LATEST.isoformat() in str(info.value)
    assert watermark_state(dated).value is None


def test_the_schedules_file_refuses_it_naming_the_field(tmp_path):
    path = tmp_path / "schedules.yaml"
    path.write_text("version: 1\nschedules:\n  - name: big\n    target_id: demo.noop\n    trigger_kind: manual\n"
                    "    retry_initial_delay: 1.0e+20\n")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply_schedules", str(path), stdout=StringIO(), stderr=err)
    assert "retry_initial_delay" in err.getvalue() and str(MAX_SECONDS) in err.getvalue(), err.getvalue()
    assert not Schedule.objects.filter(name="big").exists()


@pytest.mark.parametrize("start, end, window, field, largest", [
    ("2026-01-01T00:00:00+00:00", NEAR_MAX, "86400", "to", LATEST.isoformat()),
    ("2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00", "1e20", "window", str(MAX_SECONDS)),
])
def test_the_backfill_command_refuses_it_naming_the_field(dated, start, end, window, field, largest):
    with pytest.raises(CommandError) as info:
        call_command("backfill", "dated", "--from", start, "--to", end, "--window", window, "--reason", "old",
                     stdout=StringIO())
    assert field in str(info.value) and largest in str(info.value), str(info.value)
    assert not Backfill.objects.exists()


def test_the_python_facade_refuses_it_naming_the_field(dated):
    host = SchedulerHost()
    _refused(lambda: host.schedules.create("big", target_id="demo.noop", trigger_kind="manual",
                                           retry_max_delay=1e20), "retry_max_delay", str(MAX_SECONDS))
    _refused(lambda: host.watermarks.set("dated", NEAR_MAX, reason="far", force=True), "value", LATEST.isoformat())
    _refused(lambda: host.submit_backfill("dated", "2026-01-01T00:00:00+00:00", NEAR_MAX, 86400, reason="old"),
             "to", LATEST.isoformat())
    assert not Schedule.objects.filter(name="big").exists() and watermark_state(dated).value is None
    assert not Backfill.objects.exists()
