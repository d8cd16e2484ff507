"""One guarded statement for many rows: a compare-and-set per row, in one UPDATE.

`cas_update` joins the table to a VALUES list (one row per target row: its id,
the old values it must still hold, the new values) and returns the ids it
changed (`RETURNING`), so the caller knows which rows it won: a row that
someone else changed since it was read fails its guard and is not returned.
PostgreSQL and SQLite (3.35+, for UPDATE ... FROM and RETURNING) both run it;
older SQLite gets `supported() == False` and the callers fall back to one
compare-and-set per row.

This module imports no other service: it is plumbing, not a transition.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models

# SQLite's compile-time default bound-parameter limit since 3.32 is 32,766;
# stay well under it (and under PostgreSQL's 65,535) per statement.
MAX_PARAMS = 30_000
# values whose prepared form depends on the value alone (memoised per column)
_PLAIN = (str, int, float, bool, type(None), datetime)


def _wrapper():
    """This thread's connection itself: preparing thousands of values through the `connection` proxy
    costs a thread-local lookup per value."""
    return connections[DEFAULT_DB_ALIAS]


def supported() -> bool:
    """True when the database runs UPDATE ... FROM (VALUES ...) ... RETURNING."""
    if connection.vendor == "postgresql":
        return True
    return connection.vendor == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)


def same(left: str, right: str) -> str:
    """Null-safe equality in SQL (a NULL heartbeat equals a NULL heartbeat)."""
    if connection.vendor == "postgresql":
        return f"{left} IS NOT DISTINCT FROM {right}"
    return f"{left} IS {right}"


def cas_update(
    model: type[models.Model],
    *,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    assign: str,
    guard: str,
    assign_params: Sequence[Any] = (),
    guard_params: Sequence[Any] = (),
) -> set[int]:
    """UPDATE model AS t SET <assign> FROM <rows> AS v WHERE t.id = v.id AND <guard> RETURNING t.id.

    `columns` names each value of a row as (alias, model field that gives its
    type); the first is ("id", "id"). `assign` and `guard` are SQL over `t.`
    (the table's columns) and `v.` (the aliases). Values are adapted like the
    ORM adapts them, so comparing a stored column with its old value is exact.
    Constants go in `assign_params` / `guard_params` (%s in `assign` / `guard`).
    Returns the ids of the rows changed.
    """
    if not rows:
        return set()
    db = _wrapper()
    fields = [model._meta.get_field(name) for _, name in columns]
    aliases = [alias for alias, _ in columns]
    table = db.ops.quote_name(model._meta.db_table)
    pk = db.ops.quote_name(model._meta.pk.column)
    changed: set[int] = set()
    for chunk, source, params in _rows_source(db, fields, aliases, rows, extra=len(assign_params) + len(guard_params)):
        # SQLite's RETURNING names the table's own columns only (no alias); PostgreSQL needs
        # the alias, since v.id is in scope too
        returning = f"t.{pk}" if db.vendor == "postgresql" else pk
        sql = f"UPDATE {table} AS t SET {assign} FROM {source} WHERE t.{pk} = v.id AND {guard} RETURNING {returning}"
        with db.cursor() as cursor:
            cursor.execute(sql, [*assign_params, *params, *guard_params])
            changed.update(row[0] for row in cursor.fetchall())
    return changed


def insert(model: type[models.Model], objs: Sequence[models.Model], *, ignore_conflicts: bool = False) -> int:
    """INSERT unsaved `objs` in one statement (per MAX_PARAMS parameters on SQLite; a COPY on PostgreSQL
    when no conflict is to be skipped).

    What bulk_create(objs) does, minus its per-value SQL compilation (most of
    its cost at a thousand rows): every value is still prepared by its field
    (get_db_prep_save), as the ORM prepares it. The primary keys are not read
    back. `ignore_conflicts` skips rows a unique constraint refuses. Returns
    the number of rows inserted (the driver's row count: skipped rows do not count).
    """
    if not objs:
        return 0
    db = _wrapper()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key or getattr(objs[0], f.attname) is not None]
    quote = db.ops.quote_name
    verb = "INSERT OR IGNORE INTO" if ignore_conflicts and db.vendor == "sqlite" else "INSERT INTO"
    tail = " ON CONFLICT DO NOTHING" if ignore_conflicts and db.vendor == "postgresql" else ""
    head = f"{verb} {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
    aliases = [f"c{i}" for i in range(len(fields))]
    rows = [[f.pre_save(obj, True) for f in fields] for obj in objs]
    if db.vendor == "postgresql" and not ignore_conflicts:
        # COPY streams the rows (the driver formats them in C): no array literals to render and parse
        columns = [_column(db, f, [row[i] for row in rows], save=True) for i, f in enumerate(fields)]
        with db.cursor() as cursor:
            with cursor.copy(f"COPY {quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
                             "FROM STDIN") as copy:
                for row in zip(*columns):
                    copy.write_row(row)
        return len(rows)
    inserted = 0
    for _chunk, source, params in _rows_source(db, fields, aliases, rows, save=True):
        with db.cursor() as cursor:
            cursor.execute(f"{head}SELECT {', '.join(f'v.{a}' for a in aliases)} FROM {source}{tail}", params)
            inserted += cursor.rowcount
    return inserted


def _rows_source(db, fields, aliases, rows, *, extra: int = 0, save: bool = False):
    """(chunk, FROM-source SQL aliased `v` with columns `aliases`, params) per statement.

    PostgreSQL: one array per column, UNNEST-ed (as Django's bulk_create does
    there): a handful of parameters whatever the number of rows, so neither
    the client's placeholder parsing nor the planner grows with the rows.
    SQLite: a VALUES list, at most MAX_PARAMS parameters per statement.
    """
    if db.vendor == "postgresql":
        # arrays take their element type from the column (varchar(64) -> varchar: nothing is truncated)
        arrays = ", ".join(f"(%s)::{f.db_type(db).split('(')[0]}[]" for f in fields)
        source = f"UNNEST({arrays}) AS v({', '.join(aliases)})"
        yield rows, source, [_column(db, f, [row[i] for row in rows], save=save) for i, f in enumerate(fields)]
        return
    cell = "(" + ", ".join(["%s"] * len(fields)) + ")"
    names = ", ".join(f"column{i + 1} AS {alias}" for i, alias in enumerate(aliases))
    per_statement = max(1, (MAX_PARAMS - extra) // len(fields))
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        source = f"(SELECT {names} FROM (VALUES {', '.join([cell] * len(chunk))}) AS x) AS v"
        prepared = [_column(db, f, [row[i] for row in chunk], save=save) for i, f in enumerate(fields)]
        yield chunk, source, [prepared[i][r] for r in range(len(chunk)) for i in range(len(fields))]


def _column(db, field, values: list, *, save: bool = False) -> list:
    """`values` of one column prepared by `field`, as the ORM prepares them; each distinct plain value once
    (a column often repeats one value: the tick's `now`, '', None)."""
    done: dict[tuple[type, Any], Any] = {}
    out = []
    for value in values:
        key = (type(value), value) if isinstance(value, _PLAIN) else None
        if key is not None and key in done:
            out.append(done[key])
            continue
        prepared = field.get_db_prep_save(value, db) if save else field.get_db_prep_value(value, db, prepared=False)
        if key is not None:
            done[key] = prepared
        out.append(prepared)
    return out


__all__ = ["cas_update", "insert", "same", "supported"]
