"""Read from and upsert into SQL tables: SQLite and PostgreSQL.

`db` is either a URL (`sqlite:///relative.db`, `sqlite:////abs/path.db`,
`postgres://user:pw@host:5432/name`), opened directly with sqlite3 or
psycopg, or a Django database alias such as `"default"`, resolved through
`django.db.connections` when the source or sink is used, never at import.
`connection="warehouse"` instead names a connection (docs/security.md,
"Connections"): its URL, resolved when the run builds the pipeline.

Only validated identifiers (`^[A-Za-z_][A-Za-z0-9_.]*$`, double-quoted in the
statement) are written into SQL; every value travels as a bind parameter.

Datetime windows: PostgreSQL gets datetime objects (for `timestamptz`
columns); SQLite gets the canonical ISO text of `values.iso_utc`, which
compares correctly with data stored in that same form.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import sys
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from typing import Any

from scheduler.core import ConfigError, EtlError, LineageDataset, LoadError, Window, stop
from scheduler.core.errors import in_context

from . import sql_stream
from .sql_load import column, copy_upsert, executemany_upsert, last_per_key, value_rows
from .values import (
    check_identifier,
    check_identifiers,
    sql_type,
    window_bounds,
)
from .sql_db import (  # noqa: F401  re-exported: a pipeline module names these through sql
    POSTGRESQL, SQLITE, _URL_SCHEMES, _Db, _column_names, check_db, connect, db_of, lineage_dataset, quote, redact)

log = logging.getLogger(__name__)
class SqlSource:
    """Rows of a table (or of a query) as dicts, optionally inside a window."""

    def __init__(
        self,
        db: str | None = None,
        *,
        connection: str | None = None,
        table: str | None = None,
        query: str | None = None,
        watermark_column: str | None = None,
        window: Any = None,
        columns: str | Sequence[str] = "*",
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        batch_size: int = 5000,
        reads: Sequence[str] | None = None,
    ) -> None:
        self.db = db_of(db, connection)
        # the tables a query reads, for lineage (a query's own text is not parsed)
        if reads is not None and table is not None:
            raise ConfigError("reads", "a table source reads its table; reads names the tables of a query")
        self.reads = check_identifiers(reads, "reads") if reads is not None else []
        if (table is None) == (query is None):
            raise ConfigError("table", "give exactly one of table or query")
        if table is not None:
            check_identifier(table, "table")
        if query is not None and (not isinstance(query, str) or not query.strip()):
            raise ConfigError("query", "must be a non-empty SQL string")
        if query is not None and columns != "*":
            raise ConfigError("columns", "select columns in the query itself")
        if params is not None and table is not None:
            raise ConfigError("params", "only a query takes params")
        if params is not None and (isinstance(params, str) or not isinstance(params, (Sequence, Mapping))):
            raise ConfigError("params", "must be a list or a dict of values")
        self.table = table
        self.query = query
        self.params = params
        if watermark_column is not None:
            check_identifier(watermark_column, "watermark_column")
        self.watermark_column = watermark_column
        self.low, self.high = window_bounds(window)
        self.window = window
        if window is not None and watermark_column is None:
            raise ConfigError("watermark_column", "a window needs the column to filter on")
        if columns == "*":
            self.columns: list[str] | None = None
        else:
            if isinstance(columns, str):
                columns = [c.strip() for c in columns.split(",")]
            self.columns = check_identifiers(columns, "columns")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size", "must be a positive integer")
        self.batch_size = batch_size

    def __repr__(self) -> str:
        what = f"table={self.table!r}" if self.table else "query=..."
        return f"SqlSource({redact(self.db)!r}, {what}, window={Window(self.low, self.high)})"

    def lineage_inputs(self) -> list[LineageDataset]:
        return [lineage_dataset(self.db, name) for name in ([self.table] if self.table else self.reads)]

    def statement(self, db: _Db) -> tuple[str, Any]:
        """The SQL and bind parameters for this source on `db`."""
        named = isinstance(self.params, Mapping)
        binds: Any = dict(self.params) if named else list(self.params or ())
        conditions = []
        col = quote(self.watermark_column) if self.watermark_column else None
        # datetime windows are [low, high), integer windows (low, high] (core/windows.py)
        low_op, high_op = Window(self.low, self.high).operators
        for op, bound, name in ((low_op, self.low, "etl_low"), (high_op, self.high, "etl_high")):
            if self.window is None or bound is None:
                continue
            conditions.append(f"{col} {op} {db.param(name if named else None)}")
            if named:
                binds[name] = db.bound(bound)
            else:
                binds.append(db.bound(bound))
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        if self.table is not None:
            cols = ", ".join(quote(c) for c in self.columns) if self.columns else "*"
            order = f" ORDER BY {col}" if col else ""
            sql = f"SELECT {cols} FROM {quote(self.table)}{where}{order}"
        elif where:
            sql = f"SELECT * FROM ({self.query.rstrip().rstrip(';')}) AS etl_q{where}"
        else:
            sql = self.query
        return sql, (binds or None)

    def extract(self) -> Iterator[dict[str, Any]]:
        db = connect(self.db)
        try:
            sql, binds = self.statement(db)
            with self._cursor(db) as cur:
                try:
                    cur.execute(sql, binds) if binds is not None else cur.execute(sql)
                    names = _column_names(cur.description)
                    while True:
                        stop.check()  # between batches: a stopped run reads no further
                        batch = cur.fetchmany(self.batch_size)
                        if not batch:
                            break
                        # dicts made in C (map over zip), not in a Python loop: a row costs what dict() costs
                        yield from map(dict, map(zip, repeat(names), batch))
                except _db_errors() as exc:
                    raise EtlError(in_context(exc, f"while reading {self!r}")) from exc
        finally:
            db.close()

    def empty_window_mark(self) -> Any | None:
        """Where an integer mark may move when this source's window (low, high] came back empty.

        One below the smallest key above `high`, when the source has one: no row lies between, so the mark
        crosses a gap in the keys wider than `max_window` without skipping a row. None when nothing lies above
        (the keys may still come) or for a datetime window.
        """
        if self.window is None or self.high is None or Window(self.low, self.high).on_calendar:
            return None
        db = connect(self.db)
        try:
            named = isinstance(self.params, Mapping)
            binds: Any = dict(self.params) if named else list(self.params or ())
            col = quote(self.watermark_column)
            if named:
                binds["etl_high"] = db.bound(self.high)
            else:
                binds.append(db.bound(self.high))
            relation = quote(self.table) if self.table is not None else f"({self.query.rstrip().rstrip(';')}) AS etl_q"
            sql = f"SELECT MIN({col}) FROM {relation} WHERE {col} > {db.param('etl_high' if named else None)}"
            cur = db.cursor()
            try:
                cur.execute(sql, binds)
                (above,) = cur.fetchone()
            except _db_errors() as exc:
                raise EtlError(in_context(exc, f"while reading {self!r}")) from exc
            finally:
                cur.close()
        finally:
            db.close()
        return None if above is None else int(above) - 1

    @contextlib.contextmanager
    def _cursor(self, db: _Db) -> Iterator[Any]:
        if db.owned and db.dialect == POSTGRESQL:
            # A server-side cursor streams batch by batch instead of pulling
            # the whole result into memory; it lives inside a transaction.
            with db.conn.transaction(), db.conn.cursor(name="etl_source") as cur:
                cur.itersize = self.batch_size
                yield cur
        else:
            cur = db.cursor()
            try:
                yield cur
            finally:
                cur.close()


def _db_errors() -> tuple[type[Exception], ...]:
    """Error bases of the drivers in use, for except clauses (only evaluated on error)."""
    errors: list[type[Exception]] = [sqlite3.Error]
    for module, name in (("psycopg", "Error"), ("django.db", "Error")):
        if module in sys.modules:
            errors.append(getattr(sys.modules[module], name))
    return tuple(errors)


class SqlSink:
    """Upserts rows on `key` in one transaction per load."""

    def __init__(
        self,
        db: str | None = None,
        *,
        connection: str | None = None,
        table: str,
        key: str | Sequence[str],
        columns: Sequence[str] | None = None,
        create: bool = False,
    ) -> None:
        self.db = db_of(db, connection)
        self.table = check_identifier(table, "table")
        self.key = check_identifiers(key, "key")
        if columns is not None:
            self.columns: list[str] | None = check_identifiers(columns, "columns")
            missing = [k for k in self.key if k not in self.columns]
            if missing:
                raise ConfigError("key", f"key column {missing[0]!r} is not among the columns")
        else:
            self.columns = None
        self.create = bool(create)

    def __repr__(self) -> str:
        return f"SqlSink({redact(self.db)!r}, table={self.table!r}, key={self.key!r})"

    def lineage_outputs(self) -> list[LineageDataset]:
        return [lineage_dataset(self.db, self.table)]

    def _columns_of(self, rows: list[dict]) -> list[str]:
        if self.columns is not None:
            return self.columns
        first = rows[0].keys()
        seen: dict[str, None] = dict.fromkeys(first)
        for row in rows:
            if row.keys() != first:  # rows usually share their keys: one comparison each, not one per column
                seen.update(dict.fromkeys(row))
        columns = check_identifiers(list(seen), "columns")
        missing = [k for k in self.key if k not in seen]
        if missing:
            raise EtlError(f"{self!r}: rows have no key column {missing[0]!r}")
        return columns

    def create_statement(self, rows: list[dict], columns: list[str], dialect: str) -> str:
        defs = []
        for name in columns:
            sample = next((r[name] for r in rows if r.get(name) is not None), None)
            defs.append(f"{quote(name)} {sql_type(sample, postgres=dialect == POSTGRESQL)}")
        keys = ", ".join(quote(k) for k in self.key)
        return f"CREATE TABLE IF NOT EXISTS {quote(self.table)} ({', '.join(defs)}, PRIMARY KEY ({keys}))"

    def conflict_clause(self, columns: list[str]) -> str:
        keys = ", ".join(quote(k) for k in self.key)
        updates = [f"{quote(c)} = excluded.{quote(c)}" for c in columns if c not in self.key]
        action = f"DO UPDATE SET {', '.join(updates)}" if updates else "DO NOTHING"
        return f"ON CONFLICT ({keys}) {action}"

    def upsert_statement(self, columns: list[str], db: _Db) -> str:
        names = ", ".join(quote(c) for c in columns)
        marks = ", ".join(db.param() for _ in columns)
        return f"INSERT INTO {quote(self.table)} ({names}) VALUES ({marks}) {self.conflict_clause(columns)}"

    def load(self, rows: list[dict]) -> int:
        rows = list(rows)
        if not rows:
            return 0
        columns = self._columns_of(rows)
        db = connect(self.db, create=self.create)
        try:
            tuples = value_rows(rows, columns, db.value, db.dialect)
            keys = [column(tuples, columns.index(k)) for k in self.key]
            for k, values in zip(self.key, keys):
                if None in values:
                    raise EtlError(f"{self!r}: row {values.index(None)} has no value for key column {k!r}")
            try:
                with db.atomic():
                    cur = db.cursor()
                    try:
                        if self.create:
                            cur.execute(self.create_statement(rows, columns, db.dialect))
                        self._write(cur, db, columns, tuples, keys)
                    finally:
                        cur.close()
            except _db_errors() as exc:
                raise EtlError(in_context(exc, f"while loading {self!r}")) from exc
        finally:
            db.close()
        return len(rows)

    def stream_from(self, source: Any, *, watermark_column: str | None = None) -> tuple[int, Any] | None:
        """Load what `source` reads with no row in Python (sql_stream.py), both PostgreSQL URLs and `create` off:
        (rows, largest `watermark_column` value). None: the rows take the usual way (`load`)."""
        if self.create or not isinstance(source, SqlSource) or not all(
                "://" in db and _URL_SCHEMES.get(db.split("://", 1)[0].lower()) == POSTGRESQL
                for db in (self.db, source.db)):
            return None
        src = connect(source.db)
        try:
            dst = connect(self.db)
            try:
                sql, binds = source.statement(src)
                return sql_stream.stream_upsert(
                    src.conn, dst.conn, query=sql, binds=binds, table=quote(self.table), key=self.key,
                    columns=self.columns, watermark_column=watermark_column, conflict=self.conflict_clause,
                    pipe=self.pipe)
            finally:
                dst.close()
        except sql_stream.Unstreamable as why:
            log.debug("%r from %r: rows go through Python (%s)", self, source, why)
            return None
        except sql_stream.SourceFailed as failed:
            raise EtlError(in_context(failed.__cause__, f"while reading {source!r}")) from failed.__cause__
        except sql_stream.SinkFailed as failed:
            raise LoadError(in_context(failed.__cause__, f"while loading {self!r}")) from failed.__cause__
        finally:
            src.close()

    pipe = staticmethod(sql_stream.pipe_blocks)  # blocks from the source's COPY into the staging table's

    def _write(self, cur: Any, db: _Db, columns: list[str], tuples: list[tuple], keys: list[list]) -> None:
        if db.dialect == POSTGRESQL:  # psycopg 3 (a runtime dependency, and Django's choice when installed)
            # COPY into a staging table, then one upsert: rows move at COPY's speed, not one statement each
            copy_upsert(cur, table=quote(self.table), names=", ".join(quote(c) for c in columns), key=self.key,
                        conflict=self.conflict_clause(columns), tuples=last_per_key(tuples, keys))
        else:
            executemany_upsert(cur, sql=self.upsert_statement(columns, db), tuples=tuples)
