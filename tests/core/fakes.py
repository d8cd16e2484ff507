"""Test doubles for sources and sinks that count how they were used."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Iterator


T0 = datetime(2024, 1, 1, 12, 0, tzinfo=timezone.utc)


class FakeClock:
    """A clock that advances one second every time it is read."""

    def __init__(self, start: datetime = T0, step: timedelta = timedelta(seconds=1)) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        current = self.now
        self.now += self.step
        return current


class ListSource:
    def __init__(self, records: Iterable[Any], fail_times: int = 0, exc: type[Exception] = IOError) -> None:
        self.records = list(records)
        self.fail_times = fail_times
        self.exc = exc
        self.calls = 0

    def extract(self) -> Iterator[Any]:
        self.calls += 1
        if self.calls <= self.fail_times:
            raise self.exc(f"attempt {self.calls} failed")
        yield from self.records


class BrokenMidwaySource:
    """Fails during iteration (after yielding a row) the first `fail_times` calls."""

    def __init__(self, records: list[Any], fail_times: int) -> None:
        self.records = records
        self.fail_times = fail_times
        self.calls = 0

    def extract(self) -> Iterator[Any]:
        self.calls += 1
        for i, record in enumerate(self.records):
            if i == 1 and self.calls <= self.fail_times:
                raise ConnectionError("connection reset")
            yield record


class ListSink:
    def __init__(self) -> None:
        self.loads: list[list[dict]] = []

    def load(self, rows: list[dict]) -> int:
        self.loads.append(rows)
        return len(rows)

    @property
    def rows(self) -> list[dict]:
        return [r for batch in self.loads for r in batch]


def no_sleep(_: float) -> None:
    pass
