"""PostgreSQL to PostgreSQL without Python rows: how SqlSink loads what a SqlSource reads when nothing transforms it.

`COPY (the source's query) TO STDOUT` on the source's connection is piped,
block by block as the server sends them, into `COPY etl_stage FROM STDIN` on
the sink's: the staging table SqlSink's COPY path uses (sql_load.py), with
the target's types; then the same `INSERT ... SELECT ... ON CONFLICT (key)
DO UPDATE`, in the sink's one transaction (all or nothing, a stop checked
every STOP_EVERY blocks). No row becomes a Python object on the way (issue
25: the load benchmark, docs/benchmarks.md).

The values go as PostgreSQL's own text, which the target parses as it parses
what the row path sends: the source's session is pinned to one way of writing
it (UTF8, ISO dates, UTC, every float digit), whatever the server's defaults,
and the sink's reads it in UTF8 and UTC (an ISO date is never ambiguous).

It gives the rows, the count and the largest watermark value the row path
would. Before a single row moves it can still say no (None): the rows then go
the usual way through Python, which also reports any error the usual way. It
says no when the source's columns are not known plain names, when the sink
names columns that are not exactly the source's, when the staging table
cannot be made (no such target table or column), or when the largest
watermark value read back from the staging table could differ from the
source's own (a column staged as another kind of value).
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from scheduler.core import stop

from .sql_load import STAGE, TIMESTAMP, TIMESTAMPTZ, last_result, stage_like, upsert_staged
from .values import IDENTIFIER

WRITE_EVERY = 128  # blocks (rows, as the server sends COPY's text) in one write to the sink
STOP_EVERY = 1024  # blocks between two stop checks
SESSION = ("SET client_encoding = 'UTF8'; SET DateStyle = ISO; SET IntervalStyle = postgres; "
           "SET extra_float_digits = 3; SET TIME ZONE 'UTC'")
# the sink's session reads that text the same way whatever its DateStyle (ISO dates are never ambiguous); it is
# left alone there, so psycopg reads the largest mark back as the session told it to
LOCAL = "SET LOCAL client_encoding = 'UTF8'; SET LOCAL IntervalStyle = postgres; "
INTEGERS = {21, 23, 20}  # int2, int4, int8: a value is exact in any of them it fits
# a watermark column's largest value read back from staging, cast to the source's type, is the source's own largest
MARK_TYPES = {21: "int2", 23: "int4", 20: "int8", 1082: "date", TIMESTAMP: "timestamp", TIMESTAMPTZ: "timestamptz"}


def _pg() -> Any:
    """psycopg, imported by sql.connect before a connection comes here (sql.py imports it only when needed)."""
    return sys.modules["psycopg"]


class SourceFailed(Exception):
    """The source's side of the stream failed (`__cause__`): an extract error."""


class SinkFailed(Exception):
    """The sink's side of the stream failed (`__cause__`): a load error."""


class Unstreamable(Exception):
    """Nothing has moved, and the rows should take the usual way (the module docstring says when)."""


def source_columns(src: Any, query: str, binds: Any) -> list[tuple[str, int]]:
    """(name, type oid) of each column of `query` (no row read), in the round trip that pins the session's text."""
    try:
        # values bound by psycopg on the client, as COPY's own are: the settings and the probe in one text query
        cur = _pg().ClientCursor(src)
        cur.execute(f"{SESSION}; SELECT * FROM ({query}) AS etl_probe LIMIT 0", binds)
        return [(d.name, d.type_code) for d in last_result(cur).description]
    except _pg().Error as exc:
        raise Unstreamable(f"the source's query cannot be described: {exc}") from exc


def stream_upsert(src: Any, dst: Any, *, query: str, binds: Any, table: str, key: list[str],
                  columns: list[str] | None, watermark_column: str | None, conflict: Callable[[list[str]], str],
                  pipe: Callable[[Any, Any], None]) -> tuple[int, Any]:
    """Stream `query` (on connection `src`) into `table` (quoted, on connection `dst`, in autocommit mode): (rows,
    largest value of `watermark_column` among them, or None). Raises Unstreamable before anything moved,
    SourceFailed or SinkFailed after; `pipe(out, into)` moves the blocks."""
    query = query.rstrip().rstrip(";")
    described = source_columns(src, query, binds)
    names = [name for name, _ in described]
    if len(set(names)) != len(names) or not all(IDENTIFIER.match(name) for name in names):
        raise Unstreamable("the source's columns are not distinct plain names")
    if columns is not None and set(columns) != set(names):
        raise Unstreamable("the sink writes other columns than the source's")
    if any(k not in names for k in key):
        raise Unstreamable("a key column is not among the source's")
    quoted = ", ".join(f'"{name}"' for name in names)
    cur = dst.cursor()
    try:
        # the transaction begins in the staging table's round trip, and ends in the upsert's last one
        try:
            staged, unique = stage_like(cur, table=table, names=quoted, key=key, before=f"BEGIN; {LOCAL}")
        except _pg().Error as exc:
            raise Unstreamable(f"no staging table like {table}: {exc}") from exc
        mark = _mark_type(described, staged, watermark_column)
        rows = _copy(src, cur, query=query, binds=binds, names=quoted, pipe=pipe)
        largest = f'SELECT max("{watermark_column}")::{mark} FROM {STAGE}; ' if rows and mark else ""
        try:
            if rows:  # the staging table goes at commit (ON COMMIT DROP)
                upsert_staged(cur, table=table, names=quoted, key=key, conflict=conflict(columns or names),
                              unique=unique, then=f"{largest}COMMIT")
            else:
                cur.execute("COMMIT")
            return rows, last_result(cur).fetchone()[0] if largest else None
        except _pg().Error as exc:
            raise SinkFailed() from exc
    except BaseException:
        if dst.info.transaction_status != IDLE:
            try:
                dst.execute("ROLLBACK")
            except _pg().Error:  # a connection that cannot roll back is not kept (sql_pool.give_back)
                pass
        raise


IDLE = 0  # psycopg.pq.TransactionStatus.IDLE


def _mark_type(described: list[tuple[str, int]], staged: dict[str, int], column: str | None) -> str | None:
    """The source's type of the watermark column, to read its largest value back as; None: not among the columns.
    Unstreamable when the staged values could order differently or lose what the source's had."""
    source = dict(described).get(column) if column else None
    if source is None:
        return None
    stage = staged.get(column)
    same = stage == source or (source, stage) == (TIMESTAMP, TIMESTAMPTZ) or {source, stage} <= INTEGERS
    if source not in MARK_TYPES or not same:
        raise Unstreamable(f"the watermark column {column!r} is staged as another kind of value")
    return MARK_TYPES[source]


def _copy(src: Any, cur: Any, *, query: str, binds: Any, names: str, pipe: Callable[[Any, Any], None]) -> int:
    """COPY the source's rows into the staging table; how many."""
    side = SinkFailed
    try:
        with cur.copy(f"COPY {STAGE} ({names}) FROM STDIN") as into:
            side = SourceFailed
            with src.cursor().copy(f"COPY ({query}) TO STDOUT", binds) as out:
                pipe(out, into)  # raises SinkFailed itself when a write fails
            side = SinkFailed  # the end of the COPY into the staging table: where the target's types reject a value
    except _pg().Error as exc:
        raise side() from exc
    return cur.rowcount


def pipe_blocks(out: Any, into: Any) -> None:
    """The source's COPY blocks into the sink's, WRITE_EVERY at a time (a write costs more than a block; much
    larger writes keep the sink's server waiting), a stop checked every STOP_EVERY."""
    write, held = into.write, []
    for count, block in enumerate(out, start=1):
        held.append(block)
        if count % WRITE_EVERY == 0:
            if count % STOP_EVERY == 0:
                stop.check()  # a stopped run's transaction rolls back: none of its rows count
            _write(write, held)
            held = []
    stop.check()
    if held:
        _write(write, held)


def _write(write: Callable[[bytes], None], blocks: list) -> None:
    try:
        write(b"".join(blocks))
    except _pg().Error as exc:
        raise SinkFailed() from exc
