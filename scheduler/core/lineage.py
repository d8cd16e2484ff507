"""Datasets a pipeline reads and writes, named as the OpenLineage naming spec says (pure: no Django).

https://openlineage.io/docs/spec/naming: PostgreSQL is namespace `postgres://{host}:{port}`, name
`{database}.{schema}.{table}`; a local file is namespace `file`, name its absolute path. The spec names no
SQLite scheme: a SQLite table is namespace `sqlite://{absolute path of the file}`, name the table. No name or
namespace ever carries a user or a password (they come from the host and port alone).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Protocol, runtime_checkable
from urllib.parse import unquote, urlsplit

from .errors import ConfigError

POSTGRES_PORT = 5432
DEFAULT_SCHEMA = "public"


@dataclass(frozen=True)
class LineageDataset:
    """One dataset of a run's lineage: an input read or an output written."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        for field in ("namespace", "name"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(field, f"a lineage dataset needs a non-empty {field}, got {value!r}")
            if len(value) > 1000:
                raise ConfigError(field, f"a lineage dataset's {field} is longer than 1000 characters")


@runtime_checkable
class ReportsInputs(Protocol):
    def lineage_inputs(self) -> list[LineageDataset]: ...


@runtime_checkable
class ReportsOutputs(Protocol):
    def lineage_outputs(self) -> list[LineageDataset]: ...


def postgres_dataset(*, host: str, port: int | str | None, database: str, table: str) -> LineageDataset:
    """`schema.table` keeps its schema; a bare table is in `public`."""
    schema, _, bare = table.rpartition(".")
    return LineageDataset(f"postgres://{host or 'localhost'}:{port or POSTGRES_PORT}",
                          f"{database}.{schema or DEFAULT_SCHEMA}.{bare}")


def sqlite_dataset(*, path: str | os.PathLike, table: str) -> LineageDataset:
    return LineageDataset(f"sqlite://{os.path.abspath(os.fspath(path))}", table)


def file_dataset(path: str | os.PathLike) -> LineageDataset:
    return LineageDataset("file", os.path.abspath(os.fspath(path)))


def sql_url_dataset(url: str, table: str) -> LineageDataset:
    """A table of a database given by URL (`postgres://user:pw@host:5432/db`, `sqlite:////abs/file.db`)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////abs/path.db (dj-database-url's reading: the path after the third /)
        path = unquote(url.split("://", 1)[1][1:])
        return sqlite_dataset(path=path or ":memory:", table=table)
    if scheme in ("postgres", "postgresql"):
        database = unquote(parts.path.lstrip("/")) or "postgres"
        return postgres_dataset(host=parts.hostname or "localhost", port=parts.port, database=database, table=table)
    raise ConfigError("db", f"no lineage naming for a {scheme!r} database")


def unique(datasets: Iterable[LineageDataset]) -> list[LineageDataset]:
    """In first-seen order, each once."""
    return list(dict.fromkeys(datasets))


__all__ = [
    "LineageDataset", "ReportsInputs", "ReportsOutputs", "file_dataset", "postgres_dataset", "sql_url_dataset",
    "sqlite_dataset", "unique",
]
