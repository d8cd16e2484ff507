"""The audit report's counts read from the hourly counts (AuditCount) equal the log's own counts, exactly.

The oracle is `audit_counts_raw`: the three GROUP BYs of the log the report ran before the hourly counts.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from scheduler.audit_reads import audit_counts, audit_counts_raw, audit_filtered
from scheduler.models import AuditEntry, Team
from scheduler.models.audit import audit_delete_archived
from scheduler.services.common.audit import audit_record_many
from scheduler.services.history.audit_counts import audit_counts_fold

UTC = dt_timezone.utc
HOUR = timedelta(hours=1)
# zones whose local midnight is not a whole UTC hour (+5:30, +5:45, +12:45/+13:45), one with a half-hour DST
# (Lord Howe: +10:30/+11), whole-hour ones with DST, and UTC
ZONES = ["UTC", "Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Lord_Howe", "America/New_York",
         "Europe/Berlin", "America/St_Johns"]
# report times near DST changes: Lord Howe's end (2026-04-05) and start (2026-10-04), New York's and Berlin's
NOWS = [datetime(2026, 4, 5, 16, 37, 12, 345678, tzinfo=UTC), datetime(2026, 10, 20, 3, 0, tzinfo=UTC),
        datetime(2026, 3, 30, 23, 59, 59, 999999, tzinfo=UTC), datetime(2026, 11, 2, 13, 30, tzinfo=UTC)]
ACTORS = ["ada", "bob", "Ada", "governance"]
ACTIONS = ["run.trigger", "run.cancel", "run_x", "breaker.open", "schedule.update", "Run.trigger"]


def _entry(at, team_id, actor, action, target="1"):
    return AuditEntry(at=at, actor=actor, action=action, target_type="run", target_id=target,
                      target_repr=f"run {target}", team_id=team_id)


def _write(entries, way):
    """Write entries as the product does: one by one, a model bulk_create, or a service batch."""
    if way == "save":
        for entry in entries:
            entry.save(force_insert=True)
    elif way == "bulk_create":
        AuditEntry.objects.bulk_create(entries)
    else:
        audit_record_many(entries)


def _instant(now):
    """An instant within 33 days before `now` and 2 hours after it, often on or next to an hour's edge."""
    hours = st.integers(-33 * 24, 2)
    within = st.one_of(st.sampled_from([0, 1, 59 * 60 + 59, 3600 * 10**6 - 1, 30 * 60 * 10**6, 45 * 60 * 10**6]),
                       st.integers(0, 3600 * 10**6 - 1))
    base = now.replace(minute=0, second=0, microsecond=0)
    return st.builds(lambda h, us: base + h * HOUR + timedelta(microseconds=us), hours, within)


def _near(instant):
    """An instant within an hour and a half of `instant` (the window's edges: now, and 31 days before)."""
    return st.integers(-90 * 60 * 10**6, 90 * 60 * 10**6).map(lambda us: instant + timedelta(microseconds=us))


def _near_midnight(now, zone):
    """An instant within a few minutes of a local midnight of `zone`, in the 33 days before `now`."""
    local = ZoneInfo(zone)

    def make(days_back, us):
        day = (now - timedelta(days=days_back)).astimezone(local).date()
        return datetime.combine(day, datetime.min.time(), tzinfo=local).astimezone(UTC) + timedelta(microseconds=us)
    return st.builds(make, st.integers(0, 33), st.integers(-5 * 60 * 10**6, 5 * 60 * 10**6))


def _bound(now):
    """A since or until: a UTC day's start (what the form gives), any instant, or now's own hour."""
    day = st.integers(-40, 3).map(lambda d: now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=d))
    return st.one_of(day, _instant(now), st.just(now.replace(minute=0, second=0, microsecond=0)))


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_the_counts_from_the_hours_equal_the_logs_own(db, data):
    now = data.draw(st.sampled_from(NOWS), label="now")
    zone = data.draw(st.sampled_from(ZONES), label="zone")
    with transaction.atomic():
        teams = [Team.objects.create(name=f"prop-{i}").pk for i in range(3)]
        at = st.one_of(_instant(now), _near_midnight(now, zone), _near(now), _near(now - timedelta(days=31)))
        rows = data.draw(st.lists(st.tuples(at, st.sampled_from([None, *teams]), st.sampled_from(ACTORS),
                                            st.sampled_from(ACTIONS), st.sampled_from(["1", "2"])),
                                  min_size=5, max_size=60), label="entries")
        for start in range(0, len(rows), 10):
            _write([_entry(*row) for row in rows[start:start + 10]],
                   data.draw(st.sampled_from(["save", "bulk_create", "many"]), label="way"))
            if data.draw(st.booleans(), label="fold"):
                audit_counts_fold(batch=data.draw(st.integers(1, 30), label="batch"))
        ids = list(AuditEntry.objects.values_list("id", flat=True))
        if ids and data.draw(st.booleans(), label="archive some"):
            audit_delete_archived(data.draw(st.lists(st.sampled_from(ids), max_size=len(ids)), label="archived"))
            if data.draw(st.booleans(), label="fold after"):
                audit_counts_fold()
        for attempt in range(4):
            filters = {}
            if data.draw(st.booleans(), label="by team"):
                filters["team"] = Team.objects.get(pk=data.draw(st.sampled_from(teams)))
            if data.draw(st.booleans(), label="by actor"):
                filters["actor"] = data.draw(st.sampled_from(ACTORS))
            if data.draw(st.booleans(), label="by action"):
                filters["action"] = data.draw(st.sampled_from(["run", "run.", "run.trigger", "b", "R", "x"]))
            if data.draw(st.booleans(), label="since"):
                filters["since"] = data.draw(_bound(now))
            if data.draw(st.booleans(), label="until"):
                filters["until"] = data.draw(_bound(now))
            scope = {}
            if attempt == 0:
                filters = {}  # the whole window first, then filtered ones
            elif data.draw(st.booleans(), label="scoped"):
                scope = {"team_ids": frozenset(data.draw(st.lists(st.sampled_from(teams), max_size=2))),
                         "own_actor": data.draw(st.sampled_from(ACTORS))}
            with timezone.override(ZoneInfo(zone)):
                expected = audit_counts_raw(audit_filtered(filters, **scope), now=now, until=filters.get("until"))
                assert audit_counts(filters, now=now, **scope) == expected, (zone, filters, scope)
        transaction.set_rollback(True)


@pytest.mark.parametrize("zone", ["Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham", "Australia/Lord_Howe"])
def test_an_hour_that_a_local_day_begins_in_is_counted_from_the_log_for_the_days(db, zone):
    now = datetime(2026, 4, 20, 12, 0, tzinfo=UTC)
    local = ZoneInfo(zone)
    entries, inside = [], 0
    for days_back in range(1, 30):
        midnight = datetime.combine((now - timedelta(days=days_back)).astimezone(local).date(),
                                    datetime.min.time(), tzinfo=local).astimezone(UTC)
        # one entry a microsecond before a local midnight, one on it: two days, one UTC hour (but for Lord
        # Howe's summer time, +11, till April 5th)
        entries += [_entry(midnight - timedelta(microseconds=1), None, "ada", "run.trigger"),
                    _entry(midnight, None, "ada", "run.trigger")]
        inside += midnight.minute != 0
    assert inside >= 14  # local midnights inside a UTC hour
    _write(entries, "many")
    audit_counts_fold()
    with timezone.override(local):
        counts = audit_counts({}, now=now)
        assert counts == audit_counts_raw(audit_filtered({}), now=now)
    assert all(day["n"] in (1, 2) for day in counts["by_day"]) and len(counts["by_day"]) >= 29


def test_the_edges_partial_hours_count_to_the_microsecond(db):
    now = datetime(2026, 4, 20, 12, 30, tzinfo=UTC)
    start = now - timedelta(days=31)  # 11:30 a month back: the window starts mid-hour
    _write(
        [
            _entry(start - timedelta(microseconds=1), None, "ada", "run.trigger"),  # out
            _entry(start, None, "bob", "run.trigger"),  # in: the first instant
            _entry(start + timedelta(minutes=29, seconds=59), None, "bob", "run.trigger"),  # in: the first whole hour
            _entry(
                now.replace(minute=0) - timedelta(microseconds=1), None, "cyd", "run.trigger"
            ),  # the last whole hour
            _entry(now, None, "dan", "run.trigger"),  # now's own hour
            _entry(now + timedelta(hours=3), None, "eve", "run.trigger"),
        ],
        "save",
    )  # stamped ahead: counted (no until)
    counts = audit_counts({}, now=now)
    assert counts == audit_counts_raw(audit_filtered({}), now=now)
    assert {c["actor"]: c["n"] for c in counts["by_actor"]} == {"bob": 2, "cyd": 1, "dan": 1, "eve": 1}
    until = now.replace(minute=0) + timedelta(minutes=7)  # an until inside an hour: its start is counted, not after
    assert audit_counts({"until": until}, now=now) == audit_counts_raw(audit_filtered({"until": until}), now=now,
                                                                      until=until)


def test_a_target_filter_counts_the_log_bounded_to_the_window(db):
    now = datetime(2026, 4, 20, 12, 30, tzinfo=UTC)
    _write([_entry(now - timedelta(days=2), None, "ada", "run.trigger", target="7"),
            _entry(now - timedelta(days=2), None, "ada", "run.trigger", target="8"),
            _entry(now - timedelta(days=40), None, "ada", "run.trigger", target="7")], "many")
    counts = audit_counts({"target": "run:7"}, now=now)
    assert counts["by_actor"] == [{"actor": "ada", "n": 1}]


def test_the_page_counts_by_the_viewers_zone(viewer_client, db):
    now = timezone.now()
    kolkata = ZoneInfo("Asia/Kolkata")
    midnight = datetime.combine((now - timedelta(days=3)).astimezone(kolkata).date(), datetime.min.time(),
                                tzinfo=kolkata)
    _write([_entry(midnight - timedelta(minutes=10), None, "ada", "run.trigger"),
            _entry(midnight + timedelta(minutes=10), None, "ada", "run.trigger")], "save")
    session = viewer_client.session
    session["display_timezone"] = "Asia/Kolkata"
    session.save()
    by_day = viewer_client.get(reverse("scheduler:audit")).context["counts"]["by_day"]
    assert [(c["day"], c["n"]) for c in by_day] == [(midnight.date(), 1), (midnight.date() - timedelta(days=1), 1)]


def test_the_counts_range_is_written_in_the_viewers_zone_and_named_so(viewer_client, db):
    session = viewer_client.session
    session["display_timezone"] = "Asia/Kolkata"
    session.save()
    response = viewer_client.get(reverse("scheduler:audit"))
    until = response.context["counts"]["until"].astimezone(ZoneInfo("Asia/Kolkata"))
    line = " ".join(re.search(r'id="count-range">(.*?)</p>', response.content.decode(), re.S).group(1).split())
    assert f"to {until:%Y-%m-%d %H:%M:%S} IST (" in line  # the one format: to the second, the zone named


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's plan is asked; PostgreSQL's follows its statistics")
def test_the_edges_are_read_by_time_never_the_whole_log_in_another_index_order(db):
    """Grouped by action and actor, the edges' query let SQLite walk the whole log in the action index's order
    (41 ms of 48 with 14,000 entries a month, issue 25): the edges' rows go out one by one, found by `at`."""
    now = datetime(2026, 4, 20, 12, 30, tzinfo=UTC)
    _write([_entry(now - timedelta(minutes=7 * i), None, ACTORS[i % 4], ACTIONS[i % 6]) for i in range(3000)], "many")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the planner's statistics, as a long-lived database has them
    with CaptureQueriesContext(connection) as queries:
        audit_counts({}, now=now)
        audit_counts({"action": "run."}, now=now)
    with connection.cursor() as cursor:
        for query in queries.captured_queries:
            cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
            plan = [row[-1] for row in cursor.fetchall()]
            assert not [step for step in plan if step.startswith("SCAN scheduler_auditentry")], plan
