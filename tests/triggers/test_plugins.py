"""The built-in trigger plugins: validation naming the key, plain-words descriptions, fire times."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core import ConfigError
from scheduler.triggers.registry import get_trigger



def _field(exc_info) -> str:
    return exc_info.value.field


@pytest.mark.parametrize(
    "config, field",
    [
        ({}, "trigger_config.cron"),
        ({"cron": 5}, "trigger_config.cron"),
        ({"cron": "* * *"}, "trigger_config.cron"),
        ({"cron": "61 * * * *"}, "trigger_config.cron"),
        ({"cron": "0 * * * *", "every": 3}, "trigger_config.every"),
        ("0 * * * *", "trigger_config"),
    ],
)
def test_cron_refuses_a_bad_config_naming_the_key(config, field):
    with pytest.raises(ConfigError) as exc:
        get_trigger("cron").validate(config, timezone="UTC")
    assert _field(exc) == field


def test_cron_accepts_five_and_six_fields_and_normalises_spaces():
    cron = get_trigger("cron")
    assert cron.validate({"cron": "0  *  * * *"}, timezone="UTC") == {"cron": "0 * * * *"}
    assert cron.validate({"cron": "*/5 * * * * 30"}, timezone="UTC") == {"cron": "*/5 * * * * 30"}


def test_cron_refuses_an_unknown_time_zone():
    with pytest.raises(ConfigError) as exc:
        get_trigger("cron").validate({"cron": "0 * * * *"}, timezone="Mars/Olympus")
    assert exc.value.field == "timezone"


def test_cron_describes_itself_in_plain_words_with_its_zone():
    text = get_trigger("cron").describe({"cron": "0 * * * *"}, timezone="Europe/Berlin")
    assert "Europe/Berlin" in text and "0 * * * *" in text
    assert text.count("Europe/Berlin") == 1


def test_cron_fires_a_missing_local_time_once_at_the_end_of_the_gap_in_berlin():
    # 2026-03-29: Berlin jumps from 02:00 CET to 03:00 CEST; 02:30 does not exist
    fires = get_trigger("cron").next_fires({"cron": "30 2 * * *"}, timezone="Europe/Berlin",
                                           after=datetime(2026, 3, 28, 12, tzinfo=UTC), count=2)
    assert fires == [datetime(2026, 3, 29, 1, 0, tzinfo=UTC), datetime(2026, 3, 30, 0, 30, tzinfo=UTC)]


def test_cron_fires_a_repeated_local_time_once_in_new_york():
    # 2026-11-01: New York repeats 01:00-02:00 (EDT then EST); 01:30 runs once, in EDT
    fires = get_trigger("cron").next_fires({"cron": "30 1 * * *"}, timezone="America/New_York",
                                           after=datetime(2026, 10, 31, 12, tzinfo=UTC), count=2)
    assert fires == [datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]


def test_cron_fires_a_missing_local_time_once_in_new_york_spring_forward():
    # 2026-03-08: New York jumps 02:00 EST -> 03:00 EDT
    fires = get_trigger("cron").next_fires({"cron": "15 2 * * *"}, timezone="America/New_York",
                                           after=datetime(2026, 3, 7, 12, tzinfo=UTC), count=2)
    assert fires == [datetime(2026, 3, 8, 7, 0, tzinfo=UTC), datetime(2026, 3, 9, 6, 15, tzinfo=UTC)]


def test_interval_fires_every_n_seconds_from_its_anchor():
    plugin = get_trigger("interval")
    config = plugin.validate({"seconds": 90, "anchor": "2026-01-01T00:00:30+00:00"}, timezone="UTC")
    fires = plugin.next_fires(config, timezone="UTC", after=datetime(2026, 1, 1, 0, 2, tzinfo=UTC), count=3)
    # 00:00:30, 00:02:00 (not after), then:
    assert fires == [datetime(2026, 1, 1, 0, 3, 30, tzinfo=UTC), datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
                     datetime(2026, 1, 1, 0, 6, 30, tzinfo=UTC)]


def test_interval_reads_a_naive_anchor_in_the_schedule_zone():
    config = get_trigger("interval").validate({"seconds": 3600, "anchor": "2026-06-01T08:00:00"},
                                              timezone="Europe/Berlin")
    assert config["anchor"] == "2026-06-01T06:00:00+00:00"


@pytest.mark.parametrize(
    "config, field",
    [
        ({}, "trigger_config.seconds"),
        ({"seconds": 0}, "trigger_config.seconds"),
        ({"seconds": -5}, "trigger_config.seconds"),
        ({"seconds": True}, "trigger_config.seconds"),
        ({"seconds": "60"}, "trigger_config.seconds"),
        ({"seconds": 60, "anchor": "yesterday"}, "trigger_config.anchor"),
        ({"seconds": 60, "anchor": 5}, "trigger_config.anchor"),
        ({"seconds": 60, "jitter": 1}, "trigger_config.jitter"),
    ],
)
def test_interval_refuses_a_bad_config_naming_the_key(config, field):
    with pytest.raises(ConfigError) as exc:
        get_trigger("interval").validate(config, timezone="UTC")
    assert exc.value.field == field


def test_interval_describes_itself():
    assert get_trigger("interval").describe({"seconds": 3600}, timezone="UTC") == "every 1 h"
    assert get_trigger("interval").describe({"seconds": 300}, timezone="UTC") == "every 5 min"


@pytest.mark.parametrize(
    "config, field",
    [
        ({}, "trigger_config.topic"),
        ({"topic": "has space"}, "trigger_config.topic"),
        ({"topic": "orders/created"}, "trigger_config.topic"),
        ({"topic": "x" * 201}, "trigger_config.topic"),
        ({"topic": "orders", "filter": 3}, "trigger_config.filter"),
        ({"topic": "orders", "filter": "status =="}, "trigger_config.filter"),
        ({"topic": "orders", "colour": "red"}, "trigger_config.colour"),
    ],
)
def test_event_refuses_a_bad_config_naming_the_key(config, field):
    with pytest.raises(ConfigError) as exc:
        get_trigger("event").validate(config, timezone="UTC")
    assert exc.value.field == field


def test_event_describes_topic_and_filter():
    plugin = get_trigger("event")
    config = plugin.validate({"topic": "orders", "filter": " status == 'confirmed' "}, timezone="UTC")
    assert plugin.describe(config, timezone="UTC") == "on event 'orders' where status == 'confirmed'"


@pytest.mark.parametrize("kind", ["webhook", "manual", "upstream"])
def test_untimed_plugins_refuse_any_config_key_and_have_no_fires(kind):
    plugin = get_trigger(kind)
    with pytest.raises(ConfigError) as exc:
        plugin.validate({"cron": "* * * * *"}, timezone="UTC")
    assert exc.value.field == "trigger_config.cron"
    assert plugin.next_fires({}, timezone="UTC", after=datetime(2026, 1, 1, tzinfo=UTC), count=3) == []
    assert not plugin.time_based and plugin.describe({}, timezone="UTC")


def test_latest_fires_finds_the_newest_fires_after_a_long_outage_without_walking_them_all():
    plugin = get_trigger("cron")
    calls = []
    original = plugin.next_fires

    def counting(config, **kw):
        calls.append(kw["after"])
        return original(config, **kw)

    plugin.next_fires = counting
    try:
        # a per-minute cron down for a year: half a million fires in between
        after = datetime(2025, 1, 1, tzinfo=UTC)
        now = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
        fires = plugin.latest_fires({"cron": "* * * * *"}, timezone="UTC", after=after, now=now, count=3)
    finally:
        del plugin.next_fires
    assert fires == [now.replace(second=0) - timedelta(minutes=2), now.replace(second=0) - timedelta(minutes=1),
                     now.replace(second=0)]
    assert len(calls) < 20


def test_latest_fires_stops_at_after_when_fewer_fires_exist():
    plugin = get_trigger("interval")
    after = datetime(2026, 1, 1, tzinfo=UTC)
    fires = plugin.latest_fires(
        {"seconds": 3600}, timezone="UTC", after=after, now=after + timedelta(hours=2, minutes=5), count=10
    )
    assert fires == [after + timedelta(hours=1), after + timedelta(hours=2)]
