"""The in-process benchmark scenarios still run at a tiny size and report their figures.

No timing assertions: speed is measured by `make bench`, not by the test suite.
These tests only keep the scripts from rotting as the code they drive changes.
"""
from __future__ import annotations

import pytest


def _figures(result) -> dict[str, float]:
    return {row["figure"]: row["value"] for row in result.to_dict()["rows"]}


def test_the_core_scenario_orders_and_gates_every_shape():
    from bench.scenarios import s5_core

    result = s5_core.run(nodes=200, repeat=1)

    figures = _figures(result)
    assert {"chain, 200 nodes", "fanout, 200 nodes", "layered, 200 nodes"} <= set(figures)
    assert all(value is not None and value >= 0 for value in figures.values())


@pytest.mark.django_db
def test_the_tick_scenario_fires_exactly_the_due_schedules_and_counts_queries():
    from bench.scenarios import s3_tick

    result = s3_tick.run(schedules=60, due=5, repeat=1)

    details = result.details
    assert details["small"] == 10 and details["big"] == 60
    for key in ("at_10", "at_60"):
        assert details[key]["fire_queries"] > 0
        assert details[key]["fire_ms_median"] > 0


@pytest.mark.django_db
def test_the_executor_scenario_runs_chain_and_fanout_workflows_through_the_execute_path():
    from bench.scenarios import s4_executor
    from scheduler.models import Run, RunStatus

    result = s4_executor.run(max_nodes=12, repeat=1)

    assert set(result.details) >= {"chain", "fanout"}
    assert result.details["chain"]["execute_path_s"][12] > 0
    # warm-up + one timed run per size and shape, every one SUCCEEDED with a report of all its nodes
    runs = Run.objects.filter(schedule__name__startswith="bench-", report__isnull=False)
    assert runs.count() == 8 and set(runs.values_list("status", flat=True)) == {RunStatus.SUCCEEDED}
    assert {len(r.report["records"]) for r in runs} == {10, 12}
    # and every node of every run wrote its durable record as it finished
    assert all(r.nodes.count() == len(r.report["records"]) for r in runs)
    assert result.rows[-1]["figure"] == "durable node record (one committed INSERT), per node"


@pytest.mark.django_db
def test_the_backfill_scenario_stores_every_window():
    from bench.scenarios import s6_backfill
    from scheduler.models import BackfillWindow

    result = s6_backfill.run(windows=48, repeat=1)

    assert BackfillWindow.objects.count() == 48
    assert _figures(result)["queries per submit"] > 0


@pytest.mark.django_db
def test_the_governance_scenario_leaves_fresh_runs_alone_and_requeues_stale_ones():
    from bench.scenarios import s8_governance

    result = s8_governance.run(runs=30, repeat=1)

    assert result.details["fresh_queries"][0] > 0
    assert result.details["stale_handled"] == [30]


@pytest.mark.django_db
def test_the_command_overhead_scenario_runs_true_and_a_no_op_through_admit_and_execute():
    from bench.scenarios import s10_command
    from scheduler.models import Run, RunStatus

    result = s10_command.run(runs=2)

    details = result.details
    assert len(details["command_ms"]) == len(details["noop_ms"]) == len(details["bare_ms"]) == 2
    # warm-up and timed runs of both schedules, every one SUCCEEDED, the command's with exit code 0
    runs = Run.objects.filter(schedule__name__in=["bench-true", "bench-noop"])
    assert runs.count() == 2 * (s10_command.WARM_UP + 2)
    assert set(runs.values_list("status", flat=True)) == {RunStatus.SUCCEEDED}
    assert set(runs.filter(schedule__name="bench-true").values_list("exit_code", flat=True)) == {0}
    assert "cluster_ms" not in details  # no real cluster in the test suite


@pytest.mark.django_db
def test_the_run_log_scenario_stores_lines_up_to_the_cap_and_counts_the_rest(settings):
    from bench.scenarios import s11_runlog

    settings.ETL_RUN_LOG_MAX_BYTES = 6_000  # 100 of the writer's 60-byte lines
    measured = s11_runlog.measure(1_000)

    assert measured["lines"] == 1_000
    assert 0 < measured["stored"] <= 102  # the cap, whatever the scheduler's own notes took of it
    assert measured["counted"] >= 1_000  # every line read: stored or counted past the cap
    assert measured["hwm_mb"] > 0 and measured["lines_per_s"] > 0
