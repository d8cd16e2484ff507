"""Small row-level transforms; compose them with `Chain`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from scheduler.core import ConfigError


def _rows(result: Any) -> Iterator[dict]:
    if result is None:
        return
    if isinstance(result, Mapping):
        yield dict(result)
        return
    yield from result


class MapTransform:
    """`fn(record)` returns a row, None (drop the record) or an iterable of rows."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        if not callable(fn):
            raise ConfigError("fn", f"must be callable, got {fn!r}")
        self.fn = fn

    def apply(self, record: Any) -> Iterator[dict]:
        yield from _rows(self.fn(record))

    def __repr__(self) -> str:
        return f"MapTransform({getattr(self.fn, '__name__', self.fn)!r})"


class RenameColumns:
    """Renames keys by `mapping` (old -> new); other keys pass unchanged."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        if not isinstance(mapping, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()
        ):
            raise ConfigError("mapping", "must map old column names to new ones")
        targets = list(mapping.values())
        if len(set(targets)) != len(targets):
            raise ConfigError("mapping", "two columns would get the same new name")
        self.mapping = dict(mapping)

    def apply(self, record: Mapping[str, Any]) -> Iterator[dict]:
        out: dict[str, Any] = {}
        for key, value in record.items():
            out[self.mapping.get(key, key)] = value
        yield out

    def __repr__(self) -> str:
        return f"RenameColumns({self.mapping!r})"


class FilterRows:
    """Keeps the records for which `predicate(record)` is true."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        if not callable(predicate):
            raise ConfigError("predicate", f"must be callable, got {predicate!r}")
        self.predicate = predicate

    def apply(self, record: Any) -> Iterator[Any]:
        if self.predicate(record):
            yield record

    def __repr__(self) -> str:
        return f"FilterRows({getattr(self.predicate, '__name__', self.predicate)!r})"


class Chain:
    """Applies transforms in order; each row of one feeds the next."""

    def __init__(self, *transforms: Any) -> None:
        for t in transforms:
            if not callable(getattr(t, "apply", None)):
                raise ConfigError("transforms", f"{t!r} has no apply(record) method")
        self.transforms = transforms

    def apply(self, record: Any) -> Iterable[Any]:
        rows: Iterable[Any] = [record]
        for t in self.transforms:
            rows = [out for row in rows for out in t.apply(row)]
        return rows

    def __repr__(self) -> str:
        return "Chain(" + ", ".join(repr(t) for t in self.transforms) + ")"
