"""Schedules as code: a YAML file validated as a whole, planned, applied in one transaction, exported back."""
from __future__ import annotations

import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.models import AuditEntry, Schedule
from scheduler.services.definitions.schedule_files import (
    CREATE,
    DELETE,
    UNCHANGED,
    UPDATE,
    ScheduleFileError,
    parse_schedules_file,
    schedules_apply,
    schedules_export,
)
from scheduler.services.definitions.schedules import SCHEDULE_FIELDS, EDITABLE

pytestmark = pytest.mark.django_db

FILE = textwrap.dedent("""\
    version: 1
    schedules:
      - name: orders_sync
        description: hourly orders
        target_id: demo.orders_sync
        trigger_kind: cron
        trigger_config: {cron: "0 * * * *"}
        timezone: Europe/Berlin
        priority: 6
        workload_class: heavy
        watermark_config: {type: datetime, column: last_modified, initial: 2026-01-01T00:00:00+00:00}
      - name: report
        target_id: demo.daily_report
        trigger_kind: upstream
        depends_on: [orders_sync]
""")


def apply(text, **kw):
    kw.setdefault("actor", "tests")
    return schedules_apply(text=text, **kw)


def problems_of(text, **kw) -> list[tuple[str, str | None]]:
    with pytest.raises(ScheduleFileError) as info:
        apply(text, **kw)
    return [(p.entry, p.field) for p in info.value.problems]


def test_schedule_fields_are_the_services_editable_fields():
    assert set(SCHEDULE_FIELDS) == EDITABLE
    assert len(SCHEDULE_FIELDS) == len(set(SCHEDULE_FIELDS))


def test_it_creates_every_schedule_with_an_audit_entry_each_and_upstreams_first():
    plan = apply(FILE)
    assert plan.applied
    assert [(c.action, c.name) for c in plan.changes] == [(CREATE, "orders_sync"), (CREATE, "report")]
    orders = Schedule.objects.get(name="orders_sync")
    assert orders.workload_class.name == "heavy" and orders.priority == 6 and orders.timezone == "Europe/Berlin"
    assert orders.next_fire_at is not None
    # the date in the file stays the text the watermark config expects
    assert orders.watermark_config["initial"] == "2026-01-01T00:00:00+00:00"
    assert list(Schedule.objects.get(name="report").depends_on.values_list("name", flat=True)) == ["orders_sync"]
    assert AuditEntry.objects.filter(action="schedule.create").count() == 2


def test_applying_the_same_file_twice_changes_nothing():
    apply(FILE)
    entries_before = AuditEntry.objects.count()
    updated_at = Schedule.objects.get(name="orders_sync").updated_at
    plan = apply(FILE)
    assert not plan.applied
    assert plan.summary == {CREATE: 0, UPDATE: 0, UNCHANGED: 2, DELETE: 0}
    assert AuditEntry.objects.count() == entries_before
    assert Schedule.objects.get(name="orders_sync").updated_at == updated_at


def test_an_update_reports_the_field_diff_and_applies_only_it():
    apply(FILE)
    fire = Schedule.objects.get(name="orders_sync").next_fire_at
    changed = FILE.replace("priority: 6", "priority: 8").replace("hourly orders", "orders, hourly")
    plan = apply(changed)
    [change] = [c for c in plan.changes if c.action == UPDATE]
    assert change.name == "orders_sync"
    assert change.changes == {"description": ("hourly orders", "orders, hourly"), "priority": (6, 8)}
    orders = Schedule.objects.get(name="orders_sync")
    assert orders.priority == 8 and orders.next_fire_at == fire
    entry = AuditEntry.objects.filter(action="schedule.update").get()
    assert entry.before == {"description": "hourly orders", "priority": 6}
    assert entry.after == {"description": "orders, hourly", "priority": 8}


def test_a_field_left_out_goes_back_to_its_default():
    apply(FILE)
    plan = apply(FILE.replace("    priority: 6\n", ""))
    [change] = [c for c in plan.changes if c.action == UPDATE]
    assert change.changes == {"priority": (6, 5)}


def test_dry_run_plans_and_changes_nothing():
    plan = apply(FILE, dry_run=True)
    assert plan.summary[CREATE] == 2 and not plan.applied
    assert not Schedule.objects.exists() and not AuditEntry.objects.exists()


def test_prune_deletes_schedules_missing_from_the_file_and_only_with_prune(make_schedule):
    make_schedule("old_job")
    plan = apply(FILE)
    assert "old_job" not in {c.name for c in plan.changes}
    assert Schedule.objects.filter(name="old_job").exists()
    plan = apply(FILE, prune=True)
    assert [(c.action, c.name) for c in plan.changes if c.action == DELETE] == [(DELETE, "old_job")]
    assert not Schedule.objects.filter(name="old_job").exists()
    assert AuditEntry.objects.filter(action="schedule.delete", target_repr="old_job").count() == 1


def test_one_invalid_entry_changes_nothing_and_every_problem_names_entry_and_field(make_schedule):
    make_schedule("keep", priority=3)
    text = textwrap.dedent("""\
        schedules:
          - name: good
            target_id: demo.noop
          - name: bad_cron
            target_id: demo.noop
            trigger_kind: cron
            trigger_config: {cron: "61 * * * *"}
          - name: bad_zone
            target_id: demo.noop
            timezone: Mars/Olympus
          - name: typo
            target_id: demo.noop
            priorty: 3
          - name: keep
            target_id: demo.nope
            priority: 4
          - target_id: demo.noop
          - name: lane
            target_id: demo.noop
            workload_class: gpu
          - just text
    """)
    found = problems_of(text)
    assert found == [
        ("schedules[1] (bad_cron)", "trigger_config.cron"),
        ("schedules[2] (bad_zone)", "timezone"),
        ("schedules[3] (typo)", "priorty"),
        ("schedules[4] (keep)", "target_id"),
        ("schedules[5]", "name"),
        ("schedules[6] (lane)", "workload_class"),
        ("schedules[7]", None),
    ]
    assert sorted(Schedule.objects.values_list("name", "priority")) == [("keep", 3)]
    assert not AuditEntry.objects.exclude(action="schedule.create").exists()


def test_a_name_listed_twice_is_refused():
    text = "schedules:\n  - {name: a, target_id: demo.noop}\n  - {name: a, target_id: demo.noop}\n"
    assert problems_of(text) == [("schedules[1] (a)", "name")]


def test_unknown_upstreams_self_dependencies_and_upstreams_prune_would_delete_are_refused(make_schedule):
    make_schedule("outside")
    text = textwrap.dedent("""\
        schedules:
          - {name: a, target_id: demo.noop, depends_on: [ghost]}
          - {name: b, target_id: demo.noop, depends_on: [b]}
          - {name: c, target_id: demo.noop, depends_on: [outside]}
    """)
    assert problems_of(text, prune=True) == [
        ("schedules[0] (a)", "depends_on"), ("schedules[1] (b)", "depends_on"), ("schedules[2] (c)", "depends_on"),
    ]
    with pytest.raises(ScheduleFileError) as info:
        apply(text.replace("[ghost]", "[]").replace("[b]", "[]"), prune=True)
    assert "upstream 'outside' is not in the file and --prune would delete it" in str(info.value)
    # without --prune, a schedule kept in the database is a fine upstream
    apply(text.replace("[ghost]", "[]").replace("[b]", "[]"))
    assert list(Schedule.objects.get(name="c").depends_on.values_list("name", flat=True)) == ["outside"]


def test_a_cycle_across_the_file_and_the_database_is_refused_and_spelled(make_schedule):
    make_schedule("a")
    make_schedule("b", depends_on=["a"])
    text = "schedules:\n  - {name: a, target_id: demo.noop, depends_on: [b]}\n"
    with pytest.raises(ScheduleFileError) as info:
        apply(text)
    assert info.value.problems[0].field == "depends_on"
    assert "would create a cycle: a -> b -> a" in info.value.problems[0].problem
    assert not Schedule.objects.get(name="a").depends_on.exists()


def test_reversing_an_edge_in_one_file_is_not_a_cycle(make_schedule):
    apply("schedules:\n  - {name: a, target_id: demo.noop}\n  - {name: b, target_id: demo.noop, depends_on: [a]}\n")
    apply("schedules:\n  - {name: a, target_id: demo.noop, depends_on: [b]}\n  - {name: b, target_id: demo.noop}\n")
    assert list(Schedule.objects.get(name="a").depends_on.values_list("name", flat=True)) == ["b"]
    assert not Schedule.objects.get(name="b").depends_on.exists()


@pytest.mark.parametrize("text, field, words", [
    ("schedules: [\n", None, "not valid YAML (line 2"),
    ("- a\n- b\n", None, "must be a mapping with a 'schedules' list"),
    ("version: 2\nschedules: []\n", "version", "must be 1"),
    ("schedules: {a: 1}\n", "schedules", "must be a list"),
    ("schedule: []\n", "schedule", "unknown key"),
    ("schedules:\n  - {name: a, name: b}\n", None, "key 'name' is given twice"),
    ("schedules:\n  - !!python/object:os.system {}\n", None, "not valid YAML"),
    ("x\x00", None, "NUL"),
])
def test_a_file_that_is_not_a_schedules_document_is_refused(text, field, words):
    with pytest.raises(ScheduleFileError) as info:
        parse_schedules_file(text)
    assert info.value.problems[0].field == field
    assert words in str(info.value)


def test_an_empty_file_names_no_team_so_even_prune_deletes_nothing(make_schedule):
    # prune touches only the teams the file names (issue 22): an empty file speaks for none
    make_schedule("x")
    assert apply("schedules: []\n").summary == {CREATE: 0, UPDATE: 0, UNCHANGED: 0, DELETE: 0}
    assert apply("schedules: []\n", prune=True).summary[DELETE] == 0
    assert Schedule.objects.filter(name="x").exists()


def test_export_round_trips_through_apply(make_schedule):
    make_schedule("up", trigger_kind="interval", trigger_config={"seconds": 90}, params={"full": True, "n": 2},
                  description="multi\nline", alert_channels="mailto://a@example.com", retry_jitter=0.25)
    make_schedule("down", trigger_kind="upstream", depends_on=["up"], refresh_after_seconds=600,
                  watermark_config={"type": "integer", "column": "id", "initial": 0})
    make_schedule("webhook", trigger_kind="webhook")
    secret = Schedule.objects.get(name="webhook").webhook_secret
    text = schedules_export()
    assert secret not in text
    plan = apply(text, prune=True)
    assert plan.summary == {CREATE: 0, UPDATE: 0, UNCHANGED: 3, DELETE: 0}
    # into an empty database, the same schedules come back
    Schedule.objects.all().delete()
    apply(text)
    assert schedules_export() == text


def test_export_of_named_schedules_and_of_an_unknown_name(make_schedule):
    make_schedule("a")
    make_schedule("b")
    assert "name: a" in schedules_export(["a"]) and "name: b" not in schedules_export(["a"])
    with pytest.raises(Exception, match="unknown schedule 'zzz'"):
        schedules_export(["zzz"])


def test_a_failure_part_way_through_rolls_every_change_back(make_schedule, monkeypatch):
    from scheduler.services.definitions import schedule_files
    from scheduler.services.common.errors import ServiceError

    make_schedule("old_job")

    def refuse(**kwargs):
        raise ServiceError("refused for the test", field="schedule")

    monkeypatch.setattr(schedule_files, "schedule_delete", refuse)
    with pytest.raises(ScheduleFileError, match="refused for the test"):
        apply(FILE, prune=True)
    assert list(Schedule.objects.values_list("name", flat=True)) == ["old_job"]
    assert not AuditEntry.objects.exclude(target_repr="old_job").exists()


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**40, max_value=2**40), st.floats(), st.text(max_size=20),
    st.lists(st.text(max_size=5), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=st.dictionaries(st.sampled_from(SCHEDULE_FIELDS + ("bogus",)), _VALUES, max_size=8))
def test_generated_entries_are_planned_or_refused_never_crash(standard_class, entry):
    entry.setdefault("name", "gen")
    try:
        plan = apply(None, entries=[entry], dry_run=True)
    except ScheduleFileError as exc:
        assert exc.problems and all(p.entry.startswith("schedules[0]") for p in exc.problems)
    else:
        assert plan.summary[CREATE] == 1
    assert not Schedule.objects.exists()


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=60))
def test_generated_text_is_parsed_or_refused_never_crashes(text):
    try:
        parse_schedules_file(text)
    except ScheduleFileError as exc:
        assert exc.problems[0].entry == "file"


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["¹", "٣", "1.5", "ten"])
def test_a_whole_number_field_refuses_digits_int_cannot_read(make_schedule, value):
    from scheduler.services.common.errors import ServiceError
    from scheduler.services.definitions.schedules import schedule_save

    with pytest.raises(ServiceError) as caught:
        schedule_save(data={"name": "s1", "target_id": "demo.noop", "timeout_seconds": value}, actor="tests")
    assert "timeout_seconds" in str(caught.value) and "whole number" in str(caught.value)
