"""Extract -> transform -> load over small protocol objects."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Iterable, Iterator, Protocol, runtime_checkable

from . import stop
from .lineage import LineageDataset, ReportsInputs, ReportsOutputs, unique
from .errors import ConfigError, LoadError
from .retry import RetryPolicy, with_retry

log = logging.getLogger(__name__)


@runtime_checkable
class Source(Protocol):
    def extract(self) -> Iterable[Any]: ...


@runtime_checkable
class Transform(Protocol):
    def apply(self, record: Any) -> Iterable[dict]: ...


@runtime_checkable
class Sink(Protocol):
    def load(self, rows: list[dict]) -> int: ...


@runtime_checkable
class StreamsFrom(Protocol):
    """A sink that can load what a source reads without the records passing through Python (SqlSink from a
    SqlSource, both PostgreSQL). Returns (rows, largest value of `watermark_column` loaded), or None: this pair
    cannot, and nothing was read or written. Errors of the loading side are LoadError (not retried)."""

    def stream_from(self, source: Any, *, watermark_column: str | None) -> tuple[int, Any] | None: ...


class IdentityTransform:
    """Passes each record through unchanged."""

    def apply(self, record: Any) -> Iterator[Any]:
        yield record


@dataclass(frozen=True)
class PipelineResult:
    rows: int
    max_value: Any | None = None


class Pipeline:
    def __init__(
        self,
        source: Source,
        transform: Transform | None,
        sink: Sink,
        policy: RetryPolicy | None = None,
        refresh_after: timedelta | None = None,
        watermark_column: str | None = None,
        *,
        sleep: Callable[[float], None] | None = None,
        timeout_seconds: float | None = None,
        inputs: Iterable[LineageDataset] = (),
        outputs: Iterable[LineageDataset] = (),
    ) -> None:
        self.source = source
        self.transform: Transform = transform if transform is not None else IdentityTransform()
        self.sink = sink
        # what the pipeline's author declared (None: let the scheduler decide)
        self.declared_policy = policy
        self.policy = policy if policy is not None else RetryPolicy()
        # called before each in-process retry; raising the error passed in stops retrying
        self.on_retry: Callable[[int, BaseException, float], None] | None = None
        self.refresh_after = refresh_after
        self.watermark_column = watermark_column
        # None: a back-off sleep that wakes (and stops the run) when the run is asked to stop
        self.sleep = sleep or _stoppable_sleep
        # a workflow node's own time limit (the executor applies it; a schedule has timeout_seconds)
        self.timeout_seconds = timeout_seconds
        # datasets the author declares for OpenLineage, beside what the source and sink report themselves
        self.inputs: list[LineageDataset] = _datasets(inputs, "inputs")
        self.outputs: list[LineageDataset] = _datasets(outputs, "outputs")

    def lineage(self) -> tuple[list[LineageDataset], list[LineageDataset]]:
        """(inputs, outputs) for OpenLineage: the source's and sink's own (`lineage_inputs` / `lineage_outputs`,
        as the built-in SQL and file ones have) and the declared `inputs` / `outputs`, each once."""
        found_in = self.source.lineage_inputs() if isinstance(self.source, ReportsInputs) else []
        found_out = self.sink.lineage_outputs() if isinstance(self.sink, ReportsOutputs) else []
        return unique([*found_in, *self.inputs]), unique([*found_out, *self.outputs])

    def run(self, *, sleep: Callable[[float], None] | None = None) -> PipelineResult:
        """Extract (with retries), transform, load once; `sleep` overrides the pipeline's."""
        if type(self.transform) is IdentityTransform and isinstance(self.sink, StreamsFrom):
            streamed = self._stream(sleep or self.sleep)
            if streamed is not None:
                return streamed
        # Materialise inside the retry: a generator source can fail half-way
        # through iteration, and that failure must be retried as well.
        raw = with_retry(
            self.policy, lambda: list(self.source.extract()), sleep=sleep or self.sleep, on_retry=self._before_retry
        )
        log.info("extracted %d record(s) from %r", len(raw), self.source)
        stop.check()
        rows: list[dict] = []
        if type(self.transform) is IdentityTransform:
            rows = raw  # nothing to apply: not one generator per record (issue 25, the load benchmark)
        else:
            for index, record in enumerate(raw):
                if index % 1000 == 999:
                    stop.check()
                rows.extend(self.transform.apply(record))
        stop.check()
        count = self.sink.load(rows)
        log.info("loaded %d row(s) into %r", count, self.sink)
        max_value = self._max_value(rows)
        if not raw and max_value is None and hasattr(self.source, "empty_window_mark"):
            # an empty integer window: the source may say how far the mark can move without skipping a row
            max_value = self.source.empty_window_mark()
        return PipelineResult(rows=count, max_value=max_value)

    def _stream(self, sleep: Callable[[float], None]) -> PipelineResult | None:
        """Source to sink in one step, when the sink can (StreamsFrom): all or nothing, so a failed read is retried
        as a failed extract is; a failed load (LoadError) is not."""
        streamed = with_retry(self.policy, lambda: self.sink.stream_from(self.source,
                                                                         watermark_column=self.watermark_column),
                              sleep=sleep, on_retry=self._before_retry, retry_if=lambda e: not isinstance(e, LoadError))
        if streamed is None:
            return None
        count, max_value = streamed
        log.info("streamed %d row(s) from %r into %r", count, self.source, self.sink)
        if not count and max_value is None and hasattr(self.source, "empty_window_mark"):
            max_value = self.source.empty_window_mark()
        return PipelineResult(rows=count, max_value=max_value)

    def _before_retry(self, attempt: int, exc: BaseException, wait: float) -> None:
        if self.on_retry is not None:
            self.on_retry(attempt, exc, wait)  # may raise: no retry, so no "retry in" line
        log.warning(
            "extract attempt %d of %d failed (%s: %s); retry in %.1f s",
            attempt, self.policy.max_attempts, type(exc).__name__, exc, wait,
        )

    def run_once(self) -> int:
        return self.run().rows

    def _max_value(self, rows: list[dict]) -> Any | None:
        if not self.watermark_column:
            return None
        values = [r.get(self.watermark_column) for r in rows]
        present = [v for v in values if v is not None]
        return max(present) if present else None

    def __repr__(self) -> str:
        return f"Pipeline({self.source!r} -> {self.transform!r} -> {self.sink!r})"


def _datasets(values: Iterable[LineageDataset], field: str) -> list[LineageDataset]:
    values = list(values or ())
    for value in values:
        if not isinstance(value, LineageDataset):
            raise ConfigError(field, f"must be LineageDataset objects, got {value!r}")
    return values


def _stoppable_sleep(seconds: float) -> None:
    """time.sleep that ends early, raising RunStopped, when the run is asked to stop."""
    token = stop.current()
    token.wait(seconds)
    token.check()
