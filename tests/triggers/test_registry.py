"""Third-party trigger plugins come in through the entry point group etl_scheduler.triggers."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.core import ConfigError
from scheduler.triggers import registry
from scheduler.triggers.base import TriggerPlugin


class BusinessHours(TriggerPlugin):
    id = "business_hours"
    label = "Business hours"
    time_based = True

    def next_fires(self, config, *, timezone, after, count):
        start = after.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        return [start + timedelta(hours=i) for i in range(count)]


class FakeEntryPoint:
    def __init__(self, name, obj):
        self.name, self.value, self._obj = name, f"fake:{name}", obj

    def load(self):
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


@pytest.fixture
def fake_entry_points(monkeypatch):
    def install(*eps):
        def entry_points(group):
            assert group == registry.ENTRY_POINT_GROUP
            return list(eps)

        monkeypatch.setattr(registry, "entry_points", entry_points)

    yield install
    for pid in list(registry.all_triggers()):
        if pid in {"business_hours", "bad_one"}:
            registry.unregister_trigger(pid)


def test_a_third_party_plugin_is_loaded_from_the_entry_point_group(fake_entry_points):
    fake_entry_points(FakeEntryPoint("business_hours", BusinessHours))
    assert registry.load_entry_point_plugins(force=True) == ["business_hours"]
    plugin = registry.get_trigger("business_hours")
    assert plugin.time_based and plugin.describe({}, timezone="UTC") == "Business hours"


def test_a_broken_plugin_is_logged_and_the_others_still_load(fake_entry_points, caplog):
    fake_entry_points(
        FakeEntryPoint("broken", ImportError("no module named x")),
        FakeEntryPoint("business_hours", BusinessHours),
        FakeEntryPoint("not_a_plugin", object),
    )
    assert registry.load_entry_point_plugins(force=True) == ["business_hours"]
    assert "broken" in caplog.text and "not_a_plugin" in caplog.text


def test_a_plugin_cannot_replace_a_builtin(fake_entry_points):
    class FakeCron(TriggerPlugin):
        id = "cron"

    fake_entry_points(FakeEntryPoint("cron", FakeCron))
    assert registry.load_entry_point_plugins(force=True) == []
    assert type(registry.get_trigger("cron")).__name__ == "CronTrigger"
    with pytest.raises(ConfigError):
        registry.register_trigger(FakeCron, replace=True)


@pytest.mark.parametrize("bad_id", ["", "Has-Caps", "much_too_long_plugin_id", "9lives"])
def test_a_plugin_id_must_fit_the_run_trigger_kind_column(bad_id):
    plugin = type("P", (TriggerPlugin,), {"id": bad_id})
    with pytest.raises(ConfigError) as exc:
        registry.register_trigger(plugin)
    assert exc.value.field == "trigger_kind"


def test_an_unknown_plugin_is_a_field_error_listing_the_known_ones():
    with pytest.raises(ConfigError) as exc:
        registry.get_trigger("sometimes")
    assert exc.value.field == "trigger_kind" and "cron" in exc.value.problem


def test_a_schedule_with_a_third_party_time_plugin_fires(fake_entry_points, make_schedule):
    from scheduler.models import Run
    from scheduler.services.admission.firing import fire_due_schedules

    fake_entry_points(FakeEntryPoint("business_hours", BusinessHours))
    registry.load_entry_point_plugins(force=True)
    schedule = make_schedule("bh", trigger_kind="business_hours")
    schedule.refresh_from_db()
    assert schedule.next_fire_at is not None
    assert fire_due_schedules(now=schedule.next_fire_at) == 1
    assert Run.objects.get(schedule=schedule).trigger_kind == "business_hours"
