"""Hostile input through the management commands: exit code 2, a message naming the field, nothing changed."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.security.hostile import counts

pytestmark = pytest.mark.django_db
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def wm(make_schedule):
    return make_schedule("wm", watermark_config={"type": "integer", "column": "id", "initial": 0})


def refused(*args, field: str) -> str:
    before = counts()
    with pytest.raises(CommandError) as info:
        call_command(*args)
    assert info.value.returncode == 2, (info.value.returncode, str(info.value))
    assert field in str(info.value), f"the message does not name {field!r}: {info.value}"
    assert counts() == before, "a refused command changed something"
    return str(info.value)


@pytest.mark.parametrize("args, field", [
    (["--from", "10", "--to", "0", "--window", "1"], "from"),
    (["--from", "0", "--to", "10", "--window", "0"], "window"),
    (["--from", "0", "--to", "10", "--window", "-3"], "window"),
    (["--from", "a", "--to", "10", "--window", "1"], "from"),
    (["--from", "0", "--to", "10", "--window", "1", "--max-parallel", "-1"], "max_parallel"),
    (["--from", "0", "--to", "10", "--window", "1", "--max-parallel", str(2**40)], "max_parallel"),
    (["--from", "0", "--to", str(10**9), "--window", "1"], "window"),
])
def test_backfill_refuses_bad_ranges_and_sizes(wm, args, field):
    refused("backfill", "wm", *args, "--reason", "r", field=field)


def test_backfill_refuses_an_unknown_schedule_and_a_missing_reason(wm):
    refused("backfill", "nope", "--from", "0", "--to", "10", "--window", "1", "--reason", "r", field="nope")
    refused("backfill", "wm", "--from", "0", "--to", "10", "--window", "1", "--reason", " ", field="reason")


@FAST
@given(start=st.text(max_size=20).filter(lambda t: not t.startswith("-")),
       window=st.text(max_size=10).filter(lambda t: not t.startswith("-")))
def test_backfill_never_crashes_on_generated_arguments(wm, start, window):
    before = counts()
    try:
        call_command("backfill", "wm", "--from", start, "--to", "50", "--window", window, "--reason", "r")
    except CommandError as exc:
        assert exc.returncode == 2 and counts() == before


@pytest.mark.parametrize("args, field", [
    (["--set", "ten", "--reason", "r"], "value"),
    (["--set", "5", "--reason", ""], "reason"),
    (["--reset"], "reason"),
])
def test_watermark_refuses_bad_values_and_missing_reasons(wm, args, field):
    refused("watermark", "wm", *args, field=field)


def test_watermark_refuses_a_schedule_without_a_mark(make_schedule):
    make_schedule("plain")
    refused("watermark", "plain", "--set", "5", "--reason", "r", field="schedule")


@pytest.mark.parametrize("topic, payload, field", [
    ("bad topic!", "{}", "topic"),
    ("orders", "[1, 2]", "--payload"),
    ("orders", "{not json", "--payload"),
    ("orders", DEEP, "--payload"),
    ("orders", '{"a": NaN}', "payload"),
    ("orders", '{"a": "\\u0000"}', "payload"),
    ("orders", '{"a": "' + "x" * 2_000_000 + '"}', "payload"),
])
def test_emit_event_refuses_bad_topics_and_payloads(standard_class, topic, payload, field):
    refused("emit_event", topic, "--payload", payload, field=field)


@pytest.mark.parametrize("params, field", [
    (["novalue"], "--param"),
    (["=3"], "--param"),
    (["a=" + DEEP], "--param"),
    (["a=NaN"], "--param a"),  # JSON, but no number JSON allows: refused where it was typed
    (['a="\\u0000"'], "params"),
])
def test_trigger_refuses_bad_params(make_schedule, params, field):
    make_schedule("m")
    args = [item for p in params for item in ("--param", p)]
    refused("trigger", "m", *args, field=field)


def test_trigger_refuses_an_unknown_schedule(standard_class):
    refused("trigger", "no-such-schedule", field="no-such-schedule")


@pytest.mark.parametrize("poll", ["-1", "nan", "inf"])
def test_backfill_refuses_a_bad_poll_before_creating_the_backfill(wm, poll):
    refused("backfill", "wm", "--from", "0", "--to", "10", "--window", "1", "--reason", "r", "--wait",
            "--poll", poll, field="--poll")


@pytest.mark.parametrize("timeout", ["-5", "0", "nan"])
def test_trigger_refuses_a_bad_timeout_before_queueing_a_run(make_schedule, timeout):
    make_schedule("m")
    refused("trigger", "m", "--wait", "--timeout", timeout, field="--timeout")


def test_watermark_refuses_a_negative_history(wm):
    refused("watermark", "wm", "--history", "-3", field="--history")
