"""Event filters: CEL in a sandbox, clear parse errors, strict booleans."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import ConfigError
from scheduler.triggers.filters import compile_filter, matches

ORDER = {"status": "confirmed", "amount": 150, "country": "DE", "customer": {"tier": "gold"}, "tags": ["vip"]}


@pytest.mark.parametrize(
    "expression, expected",
    [
        ("status == 'confirmed'", True),
        ("status == 'cancelled'", False),
        ("amount > 100 && country in ['DE','FR']", True),
        ("amount > 100 && country in ['US']", False),
        ("customer.tier == 'gold'", True),
        ("'vip' in tags", True),
        ("size(tags) == 1 && status.startsWith('conf')", True),
        ("", True),
    ],
)
def test_filters_read_json_payloads(expression, expected):
    assert matches(expression, ORDER) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "missing == 1",  # a key the payload does not have
        "amount > 100.0",  # CEL does not compare int with double
        "amount",  # not a boolean
        "status",  # a string is not true
        "amount / 0 == 1",
    ],
)
def test_an_expression_that_cannot_be_judged_does_not_match(expression):
    assert matches(expression, ORDER) is False


@pytest.mark.parametrize(
    "expression, near",
    [
        ("status ==", "near '=='"),
        ("status = 'x'", "near '= 'x''"),
        ("amount > 100 &&", "near '&&'"),
        ("a &&& b", "near '& b'"),
    ],
)
def test_a_bad_filter_names_the_field_and_the_position(expression, near):
    with pytest.raises(ConfigError) as exc:
        compile_filter(expression)
    assert exc.value.field == "trigger_config.filter"
    assert "does not parse at line 1, column" in exc.value.problem
    assert near in exc.value.problem


def test_a_huge_filter_is_refused():
    with pytest.raises(ConfigError) as exc:
        compile_filter("a == 1 || " * 300 + "a == 2")
    assert "longer than" in exc.value.problem


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_any_text_either_compiles_or_is_a_field_error(text):
    try:
        compile_filter(text)
    except ConfigError as exc:
        assert exc.field == "trigger_config.filter"


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=10), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10)))
def test_hostile_payloads_never_raise(payload):
    for expression in ("status == 'confirmed'", "amount > 100 && country in ['DE','FR']", "size(tags) > 0"):
        assert matches(expression, payload) in (True, False)


# --- cost and reach: refused at save, bounded at evaluation --------------------------------

@pytest.mark.parametrize("expression, name", [
    ("__import__('os').system('true')", "__import__"),
    ("customer.__class__ == 1", "__class__"),
    ("tags.exists(t, t.__len__ > 0)", "__len__"),
])
def test_a_filter_reaching_for_a_dunder_name_is_refused(expression, name):
    with pytest.raises(ConfigError, match=f"may not use '{name}'") as info:
        compile_filter(expression)
    assert info.value.field == "trigger_config.filter"


def test_comprehensions_nested_three_deep_are_refused_as_too_costly():
    with pytest.raises(ConfigError, match="too costly: comprehensions .* nested more than 2 deep"):
        compile_filter("a.exists(x, a.exists(y, a.exists(z, x + y + z == 0)))")
    compile_filter("items.exists(i, i.tags.exists(t, t == 'x'))")  # two deep is a real need


def test_too_many_comprehensions_are_refused_as_too_costly():
    with pytest.raises(ConfigError, match="more than 8 comprehensions"):
        compile_filter(" || ".join(["tags.exists(t, t == 'x')"] * 9))


def test_an_evaluation_past_its_step_budget_stops_and_does_not_match(monkeypatch, caplog):
    from scheduler.triggers import filters

    monkeypatch.setattr(filters, "MAX_FILTER_STEPS", 2000)
    payload = {"a": list(range(300))}
    expression = "a.exists(x, a.exists(y, x + y < 0))"  # 90,000 inner evaluations, and never true
    assert matches(expression, payload) is False
    assert "stopped after its budget" in caplog.text
    assert matches("a.exists(x, x == 7)", payload) is True  # within the budget


def test_a_saved_schedule_refuses_a_dunder_filter(make_schedule):
    from scheduler.services.common.errors import ServiceError

    with pytest.raises(ServiceError) as info:
        make_schedule("ev", trigger_kind="event", trigger_config={"topic": "orders", "filter": "x.__class__ == 1"})
    assert info.value.field == "trigger_config.filter" and "__class__" in str(info.value)


@pytest.mark.django_db(transaction=True)
def test_filters_are_evaluated_outside_the_write_transaction(make_schedule, monkeypatch):
    from django.db import connection

    from scheduler.services.admission import events

    make_schedule("ev", trigger_kind="event", trigger_config={"topic": "orders", "filter": "status == 'confirmed'"})
    seen = []

    def spy(expression, payload):
        seen.append(connection.in_atomic_block)
        return matches(expression, payload)

    monkeypatch.setattr(events, "matches", spy)
    stored, runs = events.event_emit(topic="orders", payload={"status": "confirmed"}, source="t", actor="tests")
    assert seen == [False] and len(runs) == 1
    again, runs = events.event_emit(topic="orders", payload={"status": "confirmed"}, event_id=stored.event_id,
                                    source="t", actor="tests")
    assert again.duplicate and runs == [] and seen == [False], "a repeated event evaluates no filter"
