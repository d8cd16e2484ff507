import json
from datetime import timedelta

import pytest

from scheduler.core import (
    CycleError,
    EtlError,
    Executor,
    IdentityTransform,
    MemoryLedger,
    Outcome,
    Pipeline,
    RetryPolicy,
    RunRecord,
    RunReport,
)

from .fakes import T0, FakeClock, ListSink, ListSource, no_sleep


class OrderSink(ListSink):
    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__()
        self.name = name
        self.log = log

    def load(self, rows):
        self.log.append(self.name)
        return super().load(rows)


def make(executor: Executor, task_id: str, log: list[str] | None = None, fail: bool = False, **kwargs):
    source = ListSource([{"task": task_id, "v": 1}], fail_times=10**6 if fail else 0)
    sink = OrderSink(task_id, log if log is not None else [])
    policy = RetryPolicy(max_attempts=1)
    executor.add_pipeline(task_id, Pipeline(source, IdentityTransform(), sink, policy, **kwargs))
    return source


def test_it_runs_pipelines_in_dependency_order():
    log: list[str] = []
    ex = Executor(MemoryLedger(), clock=FakeClock())
    for name in ("report", "transform", "extract"):
        make(ex, name, log)
    ex.add_dep("report", depends_on="transform")
    ex.add_dep("transform", depends_on="extract")
    report = ex.run()
    assert log == ["extract", "transform", "report"]
    assert [r.task_id for r in report.records] == ["extract", "transform", "report"]
    assert report.ok


def test_independent_pipelines_run_in_insertion_order():
    log: list[str] = []
    ex = Executor(MemoryLedger(), clock=FakeClock())
    for name in ("c", "a", "b"):
        make(ex, name, log)
    ex.run()
    assert log == ["c", "a", "b"]


def test_it_records_a_run_per_node_in_the_ledger():
    ledger = MemoryLedger()
    ex = Executor(ledger, clock=FakeClock())
    make(ex, "a")
    make(ex, "b")
    ex.add_dep("b", "a")
    report = ex.run()
    assert [r.task_id for r in ledger.records] == ["a", "b"]
    assert all(r.outcome is Outcome.SUCCESS and r.rows == 1 for r in ledger.records)
    assert ledger.records == report.records
    assert all(r.started_at < r.finished_at for r in report.records)


def test_a_failed_upstream_blocks_its_dependent_and_its_source_is_never_extracted():
    ledger = MemoryLedger()
    ex = Executor(ledger, clock=FakeClock())
    make(ex, "up", fail=True)
    down = make(ex, "down")
    ex.add_dep("down", "up")
    report = ex.run()
    assert down.calls == 0
    assert report.blocked == ["down"]
    assert [(r.task_id, r.outcome) for r in report.records] == [("up", Outcome.FAILED)]
    assert report.records[0].reason == "OSError: attempt 1 failed"
    assert not report.ok
    assert [r.task_id for r in ledger.records] == ["up"]


def test_diamond_with_failing_root_blocks_every_descendant():
    ex = Executor(MemoryLedger(), clock=FakeClock())
    make(ex, "A", fail=True)
    sources = {name: make(ex, name) for name in ("B", "C", "D")}
    ex.add_dep("B", "A")
    ex.add_dep("C", "A")
    ex.add_dep("D", "B")
    ex.add_dep("D", "C")
    report = ex.run()
    assert report.blocked == ["B", "C", "D"]
    assert all(src.calls == 0 for src in sources.values())


def test_a_failure_does_not_block_unrelated_branches():
    ex = Executor(MemoryLedger(), clock=FakeClock())
    make(ex, "bad", fail=True)
    make(ex, "good")
    make(ex, "after_good")
    ex.add_dep("after_good", "good")
    report = ex.run()
    assert report.failed == ["bad"]
    assert [r.task_id for r in report.records if r.outcome is Outcome.SUCCESS] == ["good", "after_good"]
    assert report.blocked == []


def test_an_up_to_date_source_is_skipped_and_never_extracted():
    ledger = MemoryLedger()
    ledger.append(RunRecord("fresh", Outcome.SUCCESS, T0 - timedelta(minutes=20), T0 - timedelta(minutes=10)))
    ex = Executor(ledger, clock=FakeClock(T0))
    source = make(ex, "fresh", refresh_after=timedelta(hours=1))
    report = ex.run()
    assert source.calls == 0
    assert report.skipped == ["fresh"]
    assert report.records == []
    assert report.ok


def test_a_stale_source_runs_again():
    ledger = MemoryLedger()
    ledger.append(RunRecord("stale", Outcome.SUCCESS, T0 - timedelta(hours=3), T0 - timedelta(hours=2)))
    ex = Executor(ledger, clock=FakeClock(T0))
    source = make(ex, "stale", refresh_after=timedelta(hours=1))
    assert ex.run().records[0].outcome is Outcome.SUCCESS
    assert source.calls == 1


def test_a_skipped_upstream_does_not_block_its_dependents():
    ledger = MemoryLedger()
    ledger.append(RunRecord("up", Outcome.SUCCESS, T0, T0))
    ex = Executor(ledger, clock=FakeClock(T0 + timedelta(minutes=1)))
    make(ex, "up", refresh_after=timedelta(hours=1))
    down = make(ex, "down")
    ex.add_dep("down", "up")
    report = ex.run()
    assert report.skipped == ["up"] and down.calls == 1


def test_a_cycle_raises_before_any_source_is_called():
    ex = Executor(MemoryLedger(), clock=FakeClock())
    sources = [make(ex, n) for n in ("first", "a", "b", "c")]
    ex.add_dep("b", "a")
    ex.add_dep("c", "b")
    ex.add_dep("a", "c")
    with pytest.raises(CycleError) as info:
        ex.run()
    assert set(info.value.cycle) == {"a", "b", "c"}
    assert info.value.cycle[0] == info.value.cycle[-1]
    assert all(s.calls == 0 for s in sources)


def test_an_unknown_dependency_is_named_before_anything_runs():
    ex = Executor(MemoryLedger(), clock=FakeClock())
    source = make(ex, "a")
    ex.add_dep("a", "ghost")
    with pytest.raises(EtlError, match="ghost"):
        ex.run()
    assert source.calls == 0


def test_retries_inside_a_workflow_use_the_injected_sleep():
    sleeps: list[float] = []
    ex = Executor(MemoryLedger(), clock=FakeClock(), sleep=sleeps.append)
    source = ListSource([{"x": 1}], fail_times=2)
    ex.add_pipeline("flaky", Pipeline(source, IdentityTransform(), ListSink(), RetryPolicy(max_attempts=3)))
    report = ex.run()
    assert report.ok and source.calls == 3
    assert sleeps == [1.0, 2.0]


def test_the_watermark_of_a_record_is_the_max_loaded_value():
    ex = Executor(MemoryLedger(), clock=FakeClock())
    ex.add_pipeline(
        "w", Pipeline(ListSource([{"id": 4}, {"id": 9}]), None, ListSink(), watermark_column="id", sleep=no_sleep)
    )
    assert ex.run().records[0].watermark == 9


def test_on_node_hook_sees_every_event():
    events = []
    ledger = MemoryLedger()
    ledger.append(RunRecord("fresh", Outcome.SUCCESS, T0, T0))
    ex = Executor(ledger, clock=FakeClock(T0), on_node=lambda e, t, r: events.append((e, t, r is not None)))
    make(ex, "fresh", refresh_after=timedelta(hours=1))
    make(ex, "ok")
    make(ex, "bad", fail=True)
    make(ex, "child")
    ex.add_dep("child", "bad")
    ex.run()
    assert events == [
        ("skipped", "fresh", False),
        ("start", "ok", False),
        ("success", "ok", True),
        ("start", "bad", False),
        ("failed", "bad", True),
        ("blocked", "child", False),
    ]


def test_run_report_round_trips_through_json():
    ex = Executor(MemoryLedger(), clock=FakeClock())
    make(ex, "a", fail=True)
    make(ex, "b")
    ex.add_dep("b", "a")
    report = ex.run()
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False
    back = RunReport.from_dict(data)
    assert back.records == report.records
    assert back.blocked == ["b"] and back.skipped == []


def test_adding_the_same_pipeline_twice_is_refused():
    ex = Executor(MemoryLedger())
    make(ex, "a")
    with pytest.raises(EtlError, match="'a'"):
        make(ex, "a")


# --- resuming and per-node attempts ---------------------------------------------------


def test_nodes_that_already_succeeded_for_the_run_are_not_run_again_and_their_downstreams_run():
    log: list[str] = []
    ledger = MemoryLedger()
    ex = Executor(ledger, clock=FakeClock(), done={
        "extract": RunRecord("extract", Outcome.SUCCESS, T0, T0, rows=7),
        "transform": RunRecord("transform", Outcome.FAILED, T0, T0, reason="boom"),  # failed: runs again
    })
    sources = {name: make(ex, name, log) for name in ("extract", "transform", "report")}
    ex.add_dep("transform", depends_on="extract")
    ex.add_dep("report", depends_on="transform")
    report = ex.run()
    assert log == ["transform", "report"] and sources["extract"].calls == 0
    assert report.ok and report.resumed == ["extract"] and report.rows == 7 + 1 + 1
    assert [(r.task_id, r.resumed) for r in ledger.records] == [("extract", True), ("transform", False),
                                                                ("report", False)]
    assert report.to_dict()["resumed"] == ["extract"]


def test_each_record_counts_the_tries_its_node_policy_allowed():
    ex = Executor(MemoryLedger(), clock=FakeClock(), sleep=no_sleep)
    flaky = ListSource([{"v": 1}], fail_times=2)
    ex.add_pipeline("flaky", Pipeline(flaky, None, ListSink(), RetryPolicy(max_attempts=3, initial_delay=0)))
    broken = ListSource([{"v": 1}], fail_times=10)
    ex.add_pipeline("broken", Pipeline(broken, None, ListSink(), RetryPolicy(max_attempts=2, initial_delay=0)))
    report = ex.run()
    assert [(r.task_id, r.outcome, r.attempts) for r in report.records] == [
        ("flaky", Outcome.SUCCESS, 3), ("broken", Outcome.FAILED, 2)]
    assert RunRecord.from_dict(report.records[0].to_dict()).attempts == 3


def test_an_on_retry_hook_that_stops_retrying_stops_the_count_too():
    ex = Executor(MemoryLedger(), clock=FakeClock(), sleep=no_sleep)
    pipeline = Pipeline(ListSource([{"v": 1}], fail_times=10), None, ListSink(),
                        RetryPolicy(max_attempts=5, initial_delay=0))
    seen = []

    def stop_after_two(attempt, exc, wait):
        seen.append(attempt)
        if attempt >= 2:
            raise exc

    pipeline.on_retry = stop_after_two
    ex.add_pipeline("x", pipeline)
    (record,) = ex.run().records
    assert record.attempts == 2 and pipeline.on_retry is stop_after_two
