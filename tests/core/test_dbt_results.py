"""dbt's run_results.json read into node outcomes, the failure summary and the re-run selector (no Django)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduler.core.dbt_results import (
    dbt_error,
    failure_summary,
    manifest_edges,
    parse_run_results,
    rerun_selector,
    shorten,
)


def _result(uid, status, *, timing=True, rows=None, message=None, failures=None):
    steps = [{"name": "compile", "started_at": "2026-03-02T12:00:00.5Z", "completed_at": "2026-03-02T12:00:01Z"},
             {"name": "execute", "started_at": "2026-03-02T12:00:01Z", "completed_at": "2026-03-02T12:00:03.25Z"}]
    response = {"_message": "OK", **({"rows_affected": rows} if rows is not None else {})}
    return {"unique_id": uid, "status": status, "timing": steps if timing else [], "adapter_response": response,
            "message": message, "failures": failures}


RESULTS = {"results": [
    _result("seed.shop.customers", "success", rows=3, message="INSERT 3"),
    _result("model.shop.orders", "error", message="Runtime Error in model orders"),
    _result("test.shop.not_null_orders_id.6bd2c50f02", "fail", failures=2),
    _result("test.shop.unique_customers_id.a6a76acf47", "warn", message="Got 1 result"),
    _result("model.shop.order_facts", "skipped", timing=False),
    _result("operation.shop.on-run-start", "success"),  # hooks are no nodes of ours
]}


def test_each_model_seed_and_test_becomes_a_node_with_its_outcome_timing_rows_and_message():
    nodes = {n.unique_id: n for n in parse_run_results(RESULTS)}
    assert list(nodes) == ["seed.shop.customers", "model.shop.orders", "test.shop.not_null_orders_id.6bd2c50f02",
                           "test.shop.unique_customers_id.a6a76acf47", "model.shop.order_facts"]
    seed = nodes["seed.shop.customers"]
    assert (seed.outcome, seed.rows, seed.message, seed.name) == ("SUCCESS", 3, "INSERT 3", "customers")
    assert seed.started_at == datetime(2026, 3, 2, 12, 0, 0, 500000, tzinfo=timezone.utc)
    assert seed.finished_at == datetime(2026, 3, 2, 12, 0, 3, 250000, tzinfo=timezone.utc)
    assert nodes["model.shop.orders"].outcome == "FAILED" and nodes["model.shop.orders"].rows is None
    assert nodes["test.shop.not_null_orders_id.6bd2c50f02"].message == "fail: 2 failing row(s)"
    assert nodes["test.shop.unique_customers_id.a6a76acf47"].outcome == "SUCCESS"
    assert nodes["test.shop.unique_customers_id.a6a76acf47"].message == "warn: Got 1 result"
    skipped = nodes["model.shop.order_facts"]
    assert (skipped.outcome, skipped.started_at, skipped.finished_at) == ("SKIPPED", None, None)


def test_the_summary_names_what_failed_and_counts_what_was_skipped():
    nodes = parse_run_results(RESULTS)
    assert failure_summary(nodes) == "2 of 5 failed: model.orders, test.not_null_orders_id (1 skipped)"
    assert failure_summary(nodes, limit=1) == "2 of 5 failed: model.orders and 1 more (1 skipped)"


def test_the_rerun_selector_takes_what_failed_or_was_skipped_with_its_children_once_each():
    previous = [(n.unique_id, n.outcome) for n in parse_run_results(RESULTS)]
    assert rerun_selector(previous + previous) == ["orders+", "not_null_orders_id+", "order_facts+"]
    assert rerun_selector([("model.shop.orders", "SUCCESS")]) == []


def test_the_rerun_selector_stays_within_the_runs_own_selection():
    """A child outside the schedule's `select` was never part of the run: the re-run does not build it."""
    previous = [("model.shop.orders", "FAILED"), ("model.shop.order_facts", "SKIPPED")]
    assert rerun_selector(previous, within=["tag:daily"]) == ["orders+,tag:daily", "order_facts+,tag:daily"]
    assert rerun_selector(previous[:1], within=["tag:daily", "finance.*"]) == ["orders+,tag:daily",
                                                                                "orders+,finance.*"]
    assert rerun_selector(previous[:1], within=[]) == ["orders+"]


def test_the_manifest_gives_the_edges_among_the_nodes_that_ran():
    manifest = {"nodes": {"model.shop.order_facts": {"depends_on": {"nodes": ["model.shop.orders", "source.x.y"]}},
                          "model.shop.orders": {"depends_on": {"nodes": ["seed.shop.customers"]}}}}
    ids = ["model.shop.orders", "model.shop.order_facts", "seed.shop.customers"]
    assert manifest_edges(manifest, ids) == [("model.shop.orders", "model.shop.order_facts"),
                                             ("seed.shop.customers", "model.shop.orders")]
    assert manifest_edges(None, ids) == []


@pytest.mark.parametrize("data", [None, [], {"results": "x"}, {}])
def test_a_file_without_a_results_list_is_refused(data):
    with pytest.raises(ValueError):
        parse_run_results(data)


def test_a_unit_test_is_named_as_dbt_names_it_and_selected_by_its_own_method():
    """dbt logs `unit_test customer_count::test_customers_count`; its name alone would select its model instead."""
    uid = "unit_test.shop.customer_count.test_customers_count"
    [node] = parse_run_results({"results": [_result(uid, "fail", failures=1)]})
    assert (node.resource_type, node.name, node.short) == (
        "unit_test", "customer_count::test_customers_count", "unit_test.customer_count::test_customers_count")
    assert failure_summary([node]) == "1 of 1 failed: unit_test.customer_count::test_customers_count"
    previous = [(uid, "FAILED"), ("model.shop.customer_count", "SKIPPED")]
    assert rerun_selector(previous) == ["unit_test:shop.test_customers_count", "customer_count+"]
    assert rerun_selector(previous[:1], within=["tag:daily"]) == ["unit_test:shop.test_customers_count,tag:daily"]


def test_a_unit_test_hangs_under_its_model_in_the_graph():
    unit = {"depends_on": {"nodes": ["model.shop.customer_count"]}}
    manifest = {"nodes": {"model.shop.customer_count": {"depends_on": {"nodes": []}}},
                "unit_tests": {"unit_test.shop.customer_count.t": unit}}
    assert manifest_edges(manifest, ["model.shop.customer_count", "unit_test.shop.customer_count.t"]) == [
        ("model.shop.customer_count", "unit_test.shop.customer_count.t")]


# what dbt 1.10 prints when it cannot compile a project that also uses a deprecated construct
PARSE_FAILURE = """\
04:00:14  Running with dbt=1.10.23
04:00:15  [WARNING][MissingArgumentsPropertyInGenericTestDeprecation]: Deprecated
functionality
Found top-level arguments to test `accepted_values`. Arguments to generic tests
should be nested under the `arguments` property.`
04:00:16  Encountered an error:
Compilation Error
  Model 'model.shop.orphan' (models/orphan.sql) depends on a node named 'no_such_model' which was not found
04:00:16  [WARNING][DeprecationsSummary]: Deprecated functionality
Summary of encountered deprecations:
- MissingArgumentsPropertyInGenericTestDeprecation: 1 occurrence
To see all deprecation instances instead of just the first occurrence of each,
run command again with the `--show-all-deprecations` flag."""


def test_dbts_error_is_its_error_event_alone_without_the_deprecation_summary():
    assert dbt_error(PARSE_FAILURE) == ("Compilation Error Model 'model.shop.orphan' (models/orphan.sql) depends on a "
                                        "node named 'no_such_model' which was not found")
    # no error event (the output was cut): the last lines before the summary, without dbt's timestamps
    cut = PARSE_FAILURE.replace("Encountered an error:", "Something odd:")
    assert dbt_error(cut).endswith("which was not found") and "Summary" not in dbt_error(cut)
    assert "04:00:16" not in dbt_error(cut)
    assert dbt_error("") == "no output"


@pytest.mark.parametrize("limit", [20, 21, 37, 60])
def test_a_long_reason_is_cut_after_a_whole_word(limit):
    text = "Compilation Error in model orphan: the relation does not exist anywhere"
    short = shorten(text, limit)
    assert len(short) <= limit and short.endswith("…")
    kept = short.removesuffix("…")
    assert text.startswith(kept) and text[len(kept)] in " :", (limit, short)
    assert shorten(text, len(text)) == text and shorten("a\n  b", 10) == "a b"
