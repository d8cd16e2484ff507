"""Hostile input through the services and the Python API: a ServiceError naming the field, and nothing changed.

Each property says: whatever comes in, the call either succeeds or raises
ServiceError with a field; it never raises anything else (a 500 at the edge),
and a refusal leaves every table as it was.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.host import SchedulerHost
from scheduler.models import Schedule
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.events import event_emit
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.runs.watermarks import watermark_set
from tests.security.hostile import (
    bad_cron,
    bad_filter,
    bad_int,
    bad_watermark,
    bad_zone,
    counts,
    hostile_json,
    nasty_text,
)

pytestmark = pytest.mark.django_db
FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WM_INT = {"type": "integer", "column": "id", "initial": 0}
WM_DT = {"type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00"}


def refused(call, field: str | None = None) -> ServiceError:
    """The call is refused with a ServiceError (naming `field` when given) and changes nothing."""
    before = counts()
    with pytest.raises(ServiceError) as info:
        call()
    assert counts() == before, "a refused call changed something"
    assert info.value.field, f"the error names no field: {info.value}"
    if field is not None:
        assert info.value.field.split(".")[0] == field, (info.value.field, str(info.value))
    return info.value


def refused_or_accepted(call) -> None:
    """Generated input may happen to be valid; if it is not, the refusal is clean."""
    before = counts()
    try:
        call()
    except ServiceError as exc:
        assert exc.field, f"the error names no field: {exc}"
        assert counts() == before, "a refused call changed something"


def _save(**fields):
    return schedule_save(data={"name": "hostile", "target_id": "demo.noop", "trigger_kind": "manual", **fields},
                         actor="tests")


@pytest.fixture
def wm_schedule(make_schedule):
    return make_schedule("wm", watermark_config=WM_INT)


# --- schedule_save: the parsers behind every form ----------------------------------

@FAST
@given(cron=bad_cron, zone=st.sampled_from(["UTC", "Europe/Paris"]))
def test_a_hostile_cron_is_refused_naming_the_trigger_config(standard_class, cron, zone):
    refused_or_accepted(lambda: _save(trigger_kind="cron", trigger_config={"cron": cron}, timezone=zone))
    Schedule.objects.filter(name="hostile").delete()


@FAST
@given(zone=bad_zone)
def test_an_unknown_time_zone_is_refused_naming_it(standard_class, zone):
    from scheduler.core import ConfigError, validate_timezone

    try:
        validate_timezone(zone)
    except ConfigError:
        refused(lambda: _save(trigger_kind="cron", trigger_config={"cron": "0 * * * *"}, timezone=zone), "timezone")


@FAST
@given(flt=bad_filter)
def test_a_hostile_event_filter_is_refused_or_parsed_never_evaluated_unsafely(standard_class, flt):
    refused_or_accepted(lambda: _save(trigger_kind="event", trigger_config={"topic": "orders", "filter": flt}))
    Schedule.objects.filter(name="hostile").delete()


@FAST
@given(config=bad_watermark)
def test_a_hostile_watermark_config_is_refused_or_stored_cleanly(standard_class, config):
    refused_or_accepted(lambda: _save(watermark_config=config))
    Schedule.objects.filter(name="hostile").delete()


@FAST
@given(field=st.sampled_from(["params", "trigger_config"]), value=hostile_json)
def test_hostile_json_configs_never_reach_the_database_unchecked(standard_class, field, value):
    kind = {"trigger_config": "interval"}.get(field, "manual")
    refused_or_accepted(lambda: _save(trigger_kind=kind, **{field: value}))
    Schedule.objects.filter(name="hostile").delete()


@FAST
@given(field=st.sampled_from(["max_catchup", "max_wait_seconds", "max_runs_per_minute", "breaker_threshold",
                              "breaker_cooldown_seconds", "retry_max_attempts", "priority", "refresh_after_seconds"]),
       value=bad_int)
def test_negative_huge_or_non_numeric_limits_are_refused_naming_the_field(standard_class, field, value):
    if field == "refresh_after_seconds" and value is None:
        return  # None means "no freshness skip"
    refused(lambda: _save(**{field: value}), field)


@FAST
@given(field=st.sampled_from(["name", "description", "target_id", "alert_channels"]),
       value=nasty_text)
def test_hostile_text_fields_are_refused_or_stored_cleanly(standard_class, field, value):
    refused_or_accepted(lambda: _save(**{field: value}))
    Schedule.objects.filter(name="hostile").delete()


@pytest.mark.parametrize("target", ["no.such.pipeline", "", "demo.noop\x00", None, 7])
def test_an_unknown_pipeline_id_is_refused(standard_class, target):
    refused(lambda: _save(target_id=target), "target_id")


@pytest.mark.parametrize("value, field", [("yes", "enabled"), (1, "catchup"), (5, "workload_class"),
                                          ("nope", "workload_class"), ("a", "depends_on"), ([None], "depends_on")])
def test_wrong_types_are_refused_naming_the_field(standard_class, value, field):
    refused(lambda: _save(**{field: value}), field)


def test_a_cycle_is_refused_naming_it(make_schedule):
    a = make_schedule("a")
    make_schedule("b", trigger_kind="upstream", depends_on=["a"])
    error = refused(lambda: schedule_save(schedule=a, data={"trigger_kind": "upstream", "depends_on": ["b"]},
                                          actor="tests"), "depends_on")
    assert "a -> b -> a" in str(error)


# --- backfill_submit -----------------------------------------------------------------

@FAST
@given(start=nasty_text | st.integers(), end=nasty_text | st.integers(), window=bad_int | nasty_text,
       parallel=st.one_of(st.just(1), bad_int))
def test_a_hostile_backfill_request_is_refused_or_split_cleanly(wm_schedule, start, end, window, parallel):
    refused_or_accepted(lambda: backfill_submit(schedule=wm_schedule, start=start, end=end, window=window,
                                                reason="r", requested_by="tests", max_parallel=parallel))


@pytest.mark.parametrize("kwargs, field", [
    ({"window": 0}, "window"), ({"window": -5}, "window"), ({"start": 10, "end": 10}, "to"),
    ({"start": 20, "end": 10}, "to"), ({"max_parallel": 0}, "max_parallel"), ({"max_parallel": 2**40}, "max_parallel"),
    ({"reason": ""}, "reason"), ({"reason": "a\x00b"}, "reason"), ({"requested_by": "a\x00"}, "actor"),
])
def test_bad_backfill_arguments_are_refused_naming_the_field(wm_schedule, kwargs, field):
    args = {"schedule": wm_schedule, "start": 0, "end": 100, "window": 10, "reason": "r", "requested_by": "tests",
            **kwargs}
    refused(lambda: backfill_submit(**args), field)


@pytest.mark.parametrize("window", [1e30, "inf", "nan", "1e309", 0.0, "-1"])
def test_an_impossible_datetime_window_is_refused(make_schedule, window):
    schedule = make_schedule("wmdt", watermark_config=WM_DT)
    refused(lambda: backfill_submit(schedule=schedule, start="2026-01-01", end="2026-01-02", window=window,
                                    reason="r", requested_by="tests"), "window")


def test_a_backfill_on_an_unknown_schedule_or_one_without_a_watermark_is_refused(make_schedule):
    plain = make_schedule("plain")
    refused(lambda: backfill_submit(schedule="nope", start=0, end=10, window=1, reason="r", requested_by="t"))
    refused(lambda: backfill_submit(schedule=plain, start=0, end=10, window=1, reason="r", requested_by="t"),
            "schedule")


# --- run_trigger_manual, event_emit, watermark_set --------------------------------------

@FAST
@given(params=hostile_json, reason=nasty_text)
def test_hostile_manual_triggers_are_refused_or_queued_cleanly(make_schedule, params, reason):
    schedule = Schedule.objects.filter(name="m").first() or make_schedule("m")
    refused_or_accepted(lambda: run_trigger_manual(schedule=schedule, actor="tests", params=params, reason=reason))


@FAST
@given(topic=nasty_text, payload=hostile_json, event_id=st.one_of(st.none(), nasty_text, st.integers()),
       source=nasty_text)
def test_hostile_events_are_refused_or_stored_cleanly(standard_class, topic, payload, event_id, source):
    refused_or_accepted(lambda: event_emit(topic=topic, payload=payload, event_id=event_id, source=source,
                                           actor="tests"))


@FAST
@given(value=nasty_text | st.integers(), reason=nasty_text)
def test_hostile_watermark_values_are_refused_or_set_cleanly(wm_schedule, value, reason):
    refused_or_accepted(lambda: watermark_set(schedule=wm_schedule, value=value, actor="tests", reason=reason))


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "yesterday", "2026\x00"])
def test_an_out_of_range_or_unreadable_datetime_mark_is_refused(make_schedule, value):
    schedule = make_schedule("wmdt", watermark_config=WM_DT)
    refused(lambda: watermark_set(schedule=schedule, value=value, actor="tests", reason="r"), "value")


# --- the Python API -----------------------------------------------------------------------

@pytest.mark.parametrize("call, field", [
    (lambda h: h.trigger_manual("no-such-schedule"), "schedule_or_pipeline_id"),
    (lambda h: h.trigger_manual("wm", {"a": "\x00"}), "params"),
    (lambda h: h.trigger_manual("wm", ["not", "a", "dict"]), "params"),
    (lambda h: h.trigger_manual("wm", {"a": float("nan")}), "params"),
    (lambda h: h.trigger_manual("wm", reason="a\x00"), "reason"),
    (lambda h: h.submit_backfill("wm", 10, 0, 1, reason="r"), "to"),
    (lambda h: h.submit_backfill("wm", 0, 10, 0, reason="r"), "window"),
    (lambda h: h.submit_backfill("wm", 0, 10, 1, reason="r", max_parallel=-1), "max_parallel"),
    (lambda h: h.submit_backfill("nope", 0, 10, 1, reason="r"), None),
    (lambda h: h.watermarks.set("wm", "ten", reason="r"), "value"),
    (lambda h: h.watermarks.set("wm", 5, reason=""), "reason"),
    (lambda h: h.reset_circuit_breaker("nope", "tests"), None),
    (lambda h: h.backfills.pause(999999), None),
    (lambda h: h.storage.get(999999), None),
])
def test_the_python_api_refuses_bad_input_naming_the_field(wm_schedule, call, field):
    refused(lambda: call(SchedulerHost()), field)


@pytest.mark.parametrize("value", ["9" * 400, str(2**63), str(-(2**63) - 1)])
def test_an_integer_mark_beyond_64_bits_is_refused(wm_schedule, value):
    refused(lambda: watermark_set(schedule=wm_schedule, value=value, actor="tests", reason="r"), "value")
    refused(lambda: backfill_submit(schedule=wm_schedule, start=0, end=value, window=10 ** 30, reason="r",
                                    requested_by="tests"), "to")


@pytest.mark.parametrize("window", ["123456789012345678901234567890123", 2**63, 10**40])
def test_an_integer_backfill_window_beyond_64_bits_is_refused(wm_schedule, window):
    # found on PostgreSQL only: the window size column is 32 characters and SQLite does not enforce lengths
    refused(lambda: backfill_submit(schedule=wm_schedule, start=0, end=100, window=window, reason="r",
                                    requested_by="tests"), "window")


@pytest.mark.parametrize("name", ["initial", "overlap", "max_window"])
def test_an_integer_watermark_setting_beyond_64_bits_is_refused_at_save(standard_class, name):
    config = {"type": "integer", "column": "id", name: 2**64}
    error = refused(lambda: schedule_save(data={"name": "big", "target_id": "demo.noop", "trigger_kind": "manual",
                                        "watermark_config": config}, actor="tests"), "watermark_config")
    assert error.field == f"watermark_config.{name}"
