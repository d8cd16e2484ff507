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
from typing import Any

from django.db import connection, models

# SQLite's compile-time default bound-parameter limit since 3.32 is 32,766;
# stay well under it (and under PostgreSQL's 65,535) per statement.
MAX_PARAMS = 30_000


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


def cas_update(model: type[models.Model], *, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]],
               assign: str, guard: str, assign_params: Sequence[Any] = (), guard_params: Sequence[Any] = ()) -> set[int]:
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
    fields = [model._meta.get_field(name) for _, name in columns]
    if connection.vendor == "postgresql":
        # VALUES columns take no type from the table: cast each, so a column of NULLs is still typed
        cell = "(" + ", ".join(f"CAST(%s AS {f.db_type(connection)})" for f in fields) + ")"
    else:
        cell = "(" + ", ".join(["%s"] * len(fields)) + ")"
    names = ", ".join(f"column{i + 1} AS {alias}" for i, (alias, _) in enumerate(columns))
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    # SQLite's RETURNING names the table's own columns only (no alias); PostgreSQL needs
    # the alias, since v.id is in scope too
    returning = f"t.{pk}" if connection.vendor == "postgresql" else pk
    changed: set[int] = set()
    per_statement = max(1, (MAX_PARAMS - len(assign_params) - len(guard_params)) // len(fields))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            params = [*assign_params]
            params += [f.get_db_prep_value(value, connection, prepared=False)
                       for row in chunk for f, value in zip(fields, row, strict=True)]
            params += guard_params
            sql = (f"UPDATE {table} AS t SET {assign} "
                   f"FROM (SELECT {names} FROM (VALUES {', '.join([cell] * len(chunk))}) AS x) AS v "
                   f"WHERE t.{pk} = v.id AND {guard} RETURNING {returning}")
            cursor.execute(sql, params)
            changed.update(row[0] for row in cursor.fetchall())
    return changed


__all__ = ["cas_update", "same", "supported"]
