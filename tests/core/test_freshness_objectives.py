"""Freshness age, pure: last success or watermark lag, against the objective."""
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core import freshness

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_last_success_age_against_the_objective():
    fresh = freshness("last_success", now=NOW, objective=HOUR, last_success=NOW - timedelta(minutes=59),
                      mark=None, since=NOW - timedelta(days=9))
    assert fresh.age == timedelta(minutes=59) and not fresh.breached
    stale = freshness("last_success", now=NOW, objective=HOUR, last_success=NOW - timedelta(minutes=61),
                      mark=None, since=NOW)
    assert stale.breached
    assert stale.describe("last_success") == ("last success at 2026-03-02 10:59:00 UTC is 1 h 01 min old "
                                              "(objective 1 h)")


def test_exactly_at_the_objective_is_still_fresh():
    assert not freshness(
        "last_success", now=NOW, objective=HOUR, last_success=NOW - HOUR, mark=None, since=NOW
    ).breached


def test_watermark_lag_is_measured_from_the_mark():
    f = freshness("watermark", now=NOW, objective=2 * HOUR, last_success=NOW, mark=NOW - 3 * HOUR, since=NOW)
    assert f.age == 3 * HOUR and f.breached
    assert f.describe("watermark") == "watermark at 2026-03-02 09:00:00 UTC is 3 h old (objective 2 h)"


def test_before_any_success_the_age_counts_from_since():
    f = freshness("last_success", now=NOW, objective=HOUR, last_success=None, mark=None, since=NOW - 2 * HOUR)
    assert f.age == 2 * HOUR and f.measured_from == NOW - 2 * HOUR


def test_a_point_in_the_future_is_age_zero_and_an_unknown_measure_is_an_error():
    assert freshness(
        "watermark", now=NOW, objective=HOUR, last_success=None, mark=NOW + HOUR, since=NOW
    ).age == timedelta(0)
    with pytest.raises(ValueError):
        freshness("rows", now=NOW, objective=HOUR, last_success=None, mark=None, since=NOW)
