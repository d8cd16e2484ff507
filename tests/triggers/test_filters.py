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
        "__import__('os').system('true')",  # no Python reaches the sandbox
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
