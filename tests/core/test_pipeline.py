from datetime import timedelta

import pytest

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy, Sink, Source, Transform

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
