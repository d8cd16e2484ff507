import pytest

from scheduler.core import ConfigError, EtlError, PermanentError, Pipeline, RetryPolicy
from scheduler.pipelines.noop import FailingSource, MemorySink, NoopSink, NoopSource
from scheduler.pipelines.transforms import Chain, FilterRows, MapTransform, RenameColumns


def run(source, transform, sink=None, policy=None):
    sink = sink or MemorySink()
    Pipeline(source, transform, sink, policy=policy, sleep=lambda s: None).run()
    return sink.rows


def test_map_transform_returns_one_none_or_many_rows():
    def fn(r):
        return None if r["id"] == 2 else ([r, r] if r["id"] == 3 else {**r, "x": 1})
    rows = run(NoopSource(n=4), MapTransform(fn))
    assert rows == [{"id": 0, "x": 1}, {"id": 1, "x": 1}, {"id": 3}, {"id": 3}]


def test_rename_columns_renames_only_the_mapped_keys():
    rows = run(NoopSource([{"a": 1, "b": 2}]), RenameColumns({"a": "alpha", "missing": "m"}))
    assert rows == [{"alpha": 1, "b": 2}]


def test_filter_rows_keeps_rows_the_predicate_accepts():
    rows = run(NoopSource(n=6), FilterRows(lambda r: r["id"] % 2 == 0))
    assert [r["id"] for r in rows] == [0, 2, 4]


def test_chain_feeds_each_transform_into_the_next():
    chain = Chain(
        FilterRows(lambda r: r["id"] > 0),
        RenameColumns({"id": "key"}),
        MapTransform(lambda r: {**r, "k2": r["key"] * 2}),
    )
    assert run(NoopSource(n=3), chain) == [{"key": 1, "k2": 2}, {"key": 2, "k2": 4}]


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda: MapTransform(3), "fn"),
        (lambda: FilterRows("x"), "predicate"),
        (lambda: RenameColumns({"a": "x", "b": "x"}), "mapping"),
        (lambda: RenameColumns(["a"]), "mapping"),
        (lambda: Chain(object()), "transforms"),
        (lambda: NoopSource(n=-1), "n"),
        (lambda: FailingSource(times=-1), "times"),
        (lambda: FailingSource(exc="boom"), "exc"),
        (lambda: FailingSource(then=object()), "then"),
    ],
)
def test_helpers_refuse_bad_configuration_naming_the_field(build, field):
    with pytest.raises(ConfigError) as err:
        build()
    assert err.value.field == field


def test_noop_sink_counts_without_keeping_rows():
    sink = NoopSink()
    assert Pipeline(NoopSource(n=1000), None, sink).run_once() == 1000
    assert sink.loaded == 1000 and sink.calls == 1
    assert not hasattr(sink, "rows")


def test_failing_source_fails_the_first_n_extracts_then_recovers_within_the_retry_policy():
    source = FailingSource(times=2, then=NoopSource(n=3))
    sink = MemorySink()
    result = Pipeline(source, None, sink, policy=RetryPolicy(max_attempts=3), sleep=lambda s: None).run()
    assert result.rows == 3
    assert source.attempts == 3 and source.failures_left == 0


def test_failing_source_fails_the_run_when_attempts_run_out():
    source = FailingSource(times=5)
    with pytest.raises(EtlError, match="simulated failure 2 of 5"):
        Pipeline(source, None, NoopSink(), policy=RetryPolicy(max_attempts=2), sleep=lambda s: None).run()
    assert source.failures_left == 3


def test_failing_source_raises_the_given_exception_so_permanent_ones_are_not_retried():
    source = FailingSource(times=3, exc=PermanentError("bad credentials"))
    with pytest.raises(PermanentError):
        Pipeline(source, None, NoopSink(), policy=RetryPolicy(max_attempts=3), sleep=lambda s: None).run()
    assert source.attempts == 1
    with pytest.raises(ValueError, match="simulated failure 1 of 1"):
        list(FailingSource(exc=ValueError).extract())
