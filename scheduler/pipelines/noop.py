"""Sources and sinks that do nothing much, for benchmarks, tests and demos."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from scheduler.core import ConfigError, EtlError


class NoopSource:
    """Yields `records` (default: none), or `n` generated rows `{'id': i}`."""

    def __init__(self, records: Iterable[Any] | None = None, *, n: int = 0) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError("n", "must be a non-negative integer")
        if records is not None and n:
            raise ConfigError("records", "give records or n, not both")
        self.records = list(records) if records is not None else None
        self.n = n
        self.calls = 0

    def extract(self) -> Iterator[Any]:
        self.calls += 1
        if self.records is not None:
            yield from self.records
        else:
            for i in range(self.n):
                yield {"id": i}

    def __repr__(self) -> str:
        return f"NoopSource(n={len(self.records) if self.records is not None else self.n})"


class NoopSink:
    """Counts what it is given and keeps nothing."""

    def __init__(self) -> None:
        self.loaded = 0
        self.calls = 0

    def load(self, rows: list[dict]) -> int:
        self.calls += 1
        count = len(rows)
        self.loaded += count
        return count

    def __repr__(self) -> str:
        return "NoopSink()"


class MemorySink(NoopSink):
    """Keeps every row it is given in `rows` (for tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []

    def load(self, rows: list[dict]) -> int:
        self.rows.extend(rows)
        return super().load(rows)

    def __repr__(self) -> str:
        return "MemorySink()"


class FailingSource:
    """Fails the first `times` extracts with `exc`, then behaves like `then`.

    `exc` is an exception instance or class (default EtlError); `then` is
    the source used once the failures are spent (default: no records).
    """

    def __init__(
        self,
        times: int = 1,
        exc: BaseException | type[BaseException] | None = None,
        then: Any = None,
    ) -> None:
        if isinstance(times, bool) or not isinstance(times, int) or times < 0:
            raise ConfigError("times", "must be a non-negative integer")
        if exc is not None and not (
            isinstance(exc, BaseException) or (isinstance(exc, type) and issubclass(exc, BaseException))
        ):
            raise ConfigError("exc", f"must be an exception or exception class, got {exc!r}")
        if then is not None and not callable(getattr(then, "extract", None)):
            raise ConfigError("then", f"{then!r} has no extract() method")
        self.times = times
        self.exc = exc
        self.then = then if then is not None else NoopSource()
        self.attempts = 0

    @property
    def failures_left(self) -> int:
        return max(0, self.times - self.attempts)

    def extract(self) -> Iterator[Any]:
        self.attempts += 1
        if self.attempts <= self.times:
            raise self._error()
        yield from self.then.extract()

    def _error(self) -> BaseException:
        message = f"simulated failure {self.attempts} of {self.times}"
        if self.exc is None:
            return EtlError(message)
        if isinstance(self.exc, type):
            return self.exc(message)
        return self.exc

    def __repr__(self) -> str:
        return f"FailingSource(times={self.times})"
