"""The stop token a running pipeline sees: requests, deadlines, the executor and the pipeline checking it."""
from __future__ import annotations

import threading

import pytest

from scheduler.core import Executor, MemoryLedger, Pipeline, RetryPolicy, RunStopped, StopToken, stop
from scheduler.core.stop import CANCEL, TIMEOUT


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class ListSource:
    def __init__(self, rows, before=None):
        self.rows, self.before = rows, before

    def extract(self):
        if self.before:
            self.before()
        return list(self.rows)


class ListSink:
    def __init__(self):
        self.rows = []

    def load(self, rows):
        self.rows.extend(rows)
        return len(rows)


def test_the_first_request_stands_and_check_raises_it():
    token = StopToken()
    assert not token.cancelled()
    token.check()
    assert token.request(CANCEL, "operator")
    assert not token.request(TIMEOUT, "later")
    with pytest.raises(RunStopped) as caught:
        token.check()
    assert (caught.value.kind, caught.value.reason) == (CANCEL, "operator")
    assert not isinstance(caught.value, Exception)  # an `except Exception` in a pipeline does not swallow it


def test_the_run_timeout_turns_into_a_timeout_request_when_it_passes():
    clock = Clock()
    token = StopToken(timeout=30, clock=clock)
    clock.t = 129.99
    assert token.expire() is None
    clock.t = 130.0
    assert token.expire().reason == "timed out after 30 s"
    assert token.cancelled()


def test_a_nodes_timeout_holds_only_while_the_node_runs():
    clock = Clock()
    token = StopToken(clock=clock)
    with token.node_timeout("load", 5):
        clock.t = 104.0
        token.check()
        clock.t = 105.0
        with pytest.raises(RunStopped, match="node 'load' timed out after 5 s"):
            token.check()
    other = StopToken(clock=clock)
    with other.node_timeout("load", 5):
        pass
    clock.t = 1000.0
    other.check()  # the node ended before its deadline


def test_outside_a_run_nothing_is_ever_stopped():
    assert not stop.cancelled()
    stop.check()


def test_the_current_token_is_the_threads_own():
    token = StopToken()
    token.request(CANCEL, "x")
    seen = []
    with stop.activate(token):
        thread = threading.Thread(target=lambda: seen.append(stop.cancelled()))
        thread.start()
        thread.join()
        assert stop.cancelled()
    assert seen == [False] and not stop.cancelled()


def test_a_pipeline_stopped_during_its_extract_loads_nothing():
    token = StopToken()
    sink = ListSink()
    pipeline = Pipeline(ListSource([{"id": 1}], before=lambda: token.request(CANCEL, "operator")), None, sink)
    with stop.activate(token), pytest.raises(RunStopped):
        pipeline.run()
    assert sink.rows == []


def test_a_retry_back_off_wakes_and_stops_on_a_request():
    token = StopToken()
    calls = []

    def fails():
        calls.append(1)
        token.request(CANCEL, "operator")  # asked while the first try fails: the back-off must not sleep 60 s
        raise OSError("source down")


    pipeline = Pipeline(ListSource([], before=fails), None, ListSink(), RetryPolicy(max_attempts=3, initial_delay=60))
    with stop.activate(token), pytest.raises(RunStopped):
        pipeline.run()
    assert calls == [1]


def test_the_executor_starts_no_node_after_a_stop_and_does_not_record_it_as_a_failure():
    token = StopToken()
    first_sink, second_sink = ListSink(), ListSink()
    executor = Executor(MemoryLedger())
    executor.add_pipeline("a", Pipeline(ListSource([{"id": 1}]), None, first_sink))
    executor.add_pipeline("b", Pipeline(ListSource([{"id": 2}]), None, second_sink))
    executor.add_dep("b", "a")
    executor.on_node = lambda event, task, record: event == "success" and token.request(CANCEL, "operator")
    with stop.activate(token), pytest.raises(RunStopped):
        executor.run()
    assert first_sink.rows == [{"id": 1}] and second_sink.rows == []


def test_a_node_past_its_own_timeout_stops_the_run_as_a_timeout():
    clock = Clock()
    token = StopToken(clock=clock)

    def slow():
        clock.t += 10

    executor = Executor(MemoryLedger())
    executor.add_pipeline("slow", Pipeline(ListSource([{"id": 1}], before=slow), None, ListSink(), timeout_seconds=5))
    with stop.activate(token), pytest.raises(RunStopped) as caught:
        executor.run()
    assert (caught.value.kind, caught.value.reason) == (TIMEOUT, "node 'slow' timed out after 5 s")
