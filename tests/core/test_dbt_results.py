"""dbt's run_results.json read into node outcomes, the failure summary and the re-run selector (no Django)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduler.core.dbt_results import failure_summary, manifest_edges, parse_run_results, rerun_selector


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
