"""CEL filters cannot run away: arguments pre-checked, payloads bounded before evaluation (issue 22)."""
from __future__ import annotations

import pytest
from celpy import celtypes

from scheduler.core import ConfigError
from scheduler.triggers import filters
from scheduler.triggers.filters import compile_filter, matches

EVIL = "aaaaaaaaaaaaaaaaaaaaaaaaaa!"  # 27 characters: catastrophic backtracking in celpy's duration pattern


@pytest.fixture
def duration_parses(monkeypatch):
    """Every string that reaches celpy's own duration parser (the backtracking regular expression)."""
    seen: list[str] = []
    real = celtypes.DurationType.__new__

    def spy(cls, seconds, *args, **kwargs):
        if isinstance(seconds, str):
            seen.append(seconds)
        return real(cls, seconds, *args, **kwargs)

    monkeypatch.setattr(celtypes.DurationType, "__new__", spy)
    return seen


def test_a_literal_evil_duration_is_refused_when_the_filter_is_saved(duration_parses):
    compile_filter.cache_clear()
    with pytest.raises(ConfigError) as info:
        compile_filter(f'duration("{EVIL}") > duration("1s")')
    assert info.value.field == "trigger_config.filter"
    assert "duration" in info.value.problem and "such as '90s'" in info.value.problem
    assert duration_parses == []


def test_an_evil_duration_from_the_payload_is_no_match_without_reaching_the_parser(duration_parses):
    assert matches('duration(wait) > duration("1s")', {"wait": EVIL}) is False
    assert duration_parses == ["1s"]


def test_good_durations_and_timestamps_still_work():
    assert matches('duration(wait) > duration("1m30s")', {"wait": "2h"}) is True
    assert matches('duration("-1.5h") < duration("0s")', {}) is True
    assert matches('timestamp(at) > timestamp("2026-01-01T00:00:00Z")', {"at": "2026-03-01T10:00:00+01:00"}) is True


@pytest.mark.parametrize("expression", ['timestamp("2026-01-01T00:00:00Z' + "0" * 50 + '")',
                                        'timestamp("' + "9" * 40 + '")',
                                        '"x".matches("' + "(a|" * 300 + ')")'])
def test_literal_arguments_past_their_shape_or_size_are_refused_at_save(expression):
    compile_filter.cache_clear()
    with pytest.raises(ConfigError) as info:
        compile_filter(expression)
    assert info.value.field == "trigger_config.filter"


def test_a_900_kb_payload_is_refused_before_evaluation(monkeypatch):
    evaluated = []
    monkeypatch.setattr(filters._BudgetRunner, "evaluate",
                        lambda *a, **k: evaluated.append(a) or celtypes.BoolType(True))
    monkeypatch.setattr(filters.celpy, "json_to_cel", lambda v: evaluated.append(v) or v)
    payload = {"rows": ["x" * 900] * 1000}  # ~900 KB
    with pytest.raises(ConfigError) as info:
        filters.check_payload(payload)
    assert info.value.field == "payload" and "larger than" in info.value.problem
    assert matches("size(rows) > 0", payload) is False
    assert evaluated == []


def test_a_deeply_nested_payload_is_refused_before_evaluation(monkeypatch):
    evaluated = []
    monkeypatch.setattr(filters.celpy, "json_to_cel", lambda v: evaluated.append(v) or v)
    payload: dict = {}
    for _ in range(70):
        payload = {"a": payload}
    with pytest.raises(ConfigError) as info:
        filters.check_payload(payload)
    assert info.value.field == "payload" and "nested" in info.value.problem
    assert matches("has(a)", payload) is False and evaluated == []


@pytest.mark.django_db
def test_an_event_too_large_for_a_filter_is_a_400_at_the_door_and_changes_nothing(client, make_schedule, settings):
    from tests.security.hostile import counts

    settings.ETL_EVENT_TOKENS = ["tok"]
    make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders", "filter": "size(rows) > 0"})
    before = counts()
    body = '{"payload": {"rows": ["' + "x" * 200 * 1024 + '"]}}'  # under the 256 KiB of any params
    response = client.post("/api/events/orders", data=body, content_type="application/json",
                           headers={"Authorization": "Bearer tok"})
    assert response.status_code == 400
    assert response.json()["field"] == "payload" and "the most an event filter reads" in response.json()["error"]
    assert counts() == before
