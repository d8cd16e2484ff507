from datetime import timedelta

import pytest

from scheduler.core import IdentityTransform, LoadError, Pipeline, RetryPolicy, Sink, Source, Transform

from .fakes import BrokenMidwaySource, ListSink, ListSource, no_sleep


class Explode:
    """One record becomes one row per item."""

    def apply(self, record):
        for item in record["items"]:
            yield {"order": record["id"], "item": item}


def test_run_once_extracts_transforms_and_loads_in_one_batch():
    sink = ListSink()
    source = ListSource([{"id": 1, "items": ["a", "b"]}, {"id": 2, "items": ["c"]}])
    assert Pipeline(source, Explode(), sink, sleep=no_sleep).run_once() == 3
    assert len(sink.loads) == 1
    assert sink.rows == [
        {"order": 1, "item": "a"},
        {"order": 1, "item": "b"},
        {"order": 2, "item": "c"},
    ]


def test_a_failure_during_iteration_is_retried_from_the_start():
    source = BrokenMidwaySource([{"n": 1}, {"n": 2}], fail_times=1)
    sink = ListSink()
    assert Pipeline(source, IdentityTransform(), sink, sleep=no_sleep).run_once() == 2
    assert source.calls == 2
    assert sink.rows == [{"n": 1}, {"n": 2}]


def test_extract_gives_up_after_the_policy_and_loads_nothing():
    source = ListSource([{"n": 1}], fail_times=5)
    sink = ListSink()
    pipeline = Pipeline(source, IdentityTransform(), sink, RetryPolicy(max_attempts=2), sleep=no_sleep)
    with pytest.raises(IOError):
        pipeline.run()
    assert source.calls == 2
    assert sink.loads == []


def test_run_reports_the_max_watermark_value_of_loaded_rows():
    rows = [{"id": 3}, {"id": 7}, {"id": 5}]
    result = Pipeline(ListSource(rows), IdentityTransform(), ListSink(), watermark_column="id").run()
    assert (result.rows, result.max_value) == (3, 7)


def test_max_value_is_none_without_rows_or_without_a_column():
    empty = Pipeline(ListSource([]), IdentityTransform(), ListSink(), watermark_column="id").run()
    assert empty.max_value is None
    no_col = Pipeline(ListSource([{"id": 1}]), IdentityTransform(), ListSink()).run()
    assert no_col.max_value is None


def test_none_transform_means_identity_and_settings_are_kept():
    pipeline = Pipeline(ListSource([{"a": 1}]), None, ListSink(), refresh_after=timedelta(hours=1))
    assert pipeline.run_once() == 1
    assert pipeline.refresh_after == timedelta(hours=1)
    assert pipeline.policy == RetryPolicy()


def test_protocols_are_runtime_checkable():
    assert isinstance(ListSource([]), Source)
    assert isinstance(IdentityTransform(), Transform)
    assert isinstance(ListSink(), Sink)
    assert not isinstance(object(), Source)


class StreamingSink(ListSink):
    """A sink that loads from the source itself (StreamsFrom): `answers` are what each call returns or raises."""

    def __init__(self, *answers) -> None:
        super().__init__()
        self.answers = list(answers)
        self.streams: list = []

    def stream_from(self, source, *, watermark_column):
        self.streams.append((source, watermark_column))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_sink_that_streams_from_the_source_loads_without_an_extract():
    source, sink = ListSource([{"id": 1}], fail_times=99), StreamingSink((40, 9))
    result = Pipeline(source, None, sink, watermark_column="id", sleep=no_sleep).run()
    assert (result.rows, result.max_value) == (40, 9)
    assert sink.streams == [(source, "id")] and source.calls == 0 and sink.loads == []


def test_a_sink_that_cannot_stream_this_source_gets_the_rows_the_usual_way():
    sink = StreamingSink(None)
    result = Pipeline(ListSource([{"id": 3}, {"id": 5}]), None, sink, watermark_column="id").run()
    assert (result.rows, result.max_value, sink.rows) == (2, 5, [{"id": 3}, {"id": 5}])


def test_a_transform_keeps_the_rows_in_python():
    sink = StreamingSink((1, None))
    Pipeline(ListSource([{"id": 1, "items": ["a"]}]), Explode(), sink).run()
    assert sink.streams == [] and sink.rows == [{"order": 1, "item": "a"}]


def test_a_failed_read_while_streaming_is_retried_a_failed_load_is_not():
    retried = StreamingSink(OSError("source gone"), (2, None))
    assert Pipeline(ListSource([]), None, retried, RetryPolicy(max_attempts=3), sleep=no_sleep).run().rows == 2
    assert len(retried.streams) == 2
    failed = StreamingSink(LoadError("bad value"), (2, None))
    with pytest.raises(LoadError):
        Pipeline(ListSource([]), None, failed, RetryPolicy(max_attempts=3), sleep=no_sleep).run()
    assert len(failed.streams) == 1


def test_an_empty_streamed_window_asks_the_source_how_far_the_mark_may_move():
    class GapSource(ListSource):
        def empty_window_mark(self):
            return 41

    assert Pipeline(GapSource([]), None, StreamingSink((0, None)), watermark_column="id").run().max_value == 41
