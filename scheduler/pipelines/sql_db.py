"""The databases a SQL source or sink talks to: a URL, a connection's name or a Django alias, opened the same way."""
from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import urlsplit, urlunsplit

from scheduler.core import ConfigError, EtlError, LineageDataset
from scheduler.core.errors import in_context
from scheduler.core.lineage import postgres_dataset, sql_url_dataset, sqlite_dataset

from . import sql_pool
from .connections import resolve_connection
from .values import (
    iso_utc,
    sql_text_value,
    to_utc,
)

log = logging.getLogger(__name__)
SQLITE = "sqlite"
POSTGRESQL = "postgresql"
_URL_SCHEMES = {"sqlite": SQLITE, "postgres": POSTGRESQL, "postgresql": POSTGRESQL}
_MIN_SQLITE = (3, 24, 0)  # first release with INSERT ... ON CONFLICT DO UPDATE


def quote(name: str) -> str:
    """Double-quote each dotted part of an already validated identifier."""
    return ".".join(f'"{part}"' for part in name.split("."))


def redact(db: str) -> str:
    """The URL without its password, fit for messages and reprs."""
    if "://" not in db:
        return db
    parts = urlsplit(db)
    if parts.password is None:
        return db
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def check_db(db: Any) -> str:
    if not isinstance(db, str) or not db.strip():
        raise ConfigError("db", "must be a database URL or a Django database alias")
    if "://" in db:
        scheme = db.split("://", 1)[0].lower()
        if scheme not in _URL_SCHEMES:
            known = ", ".join(sorted(_URL_SCHEMES))
            raise ConfigError("db", f"unsupported URL scheme {scheme!r} (use one of: {known})")
    elif not db.replace("_", "").replace("-", "").isalnum():
        raise ConfigError("db", f"{db!r} is neither a URL nor a database alias")
    return db


def db_of(db: Any, connection: Any) -> str:
    """The database a source or sink opens: `db` (a URL or a Django alias), or the URL of `connection`, a
    connection's name (resolved for the run being built: its team's own, docs/security.md)."""
    if (db is None) == (connection is None):
        raise ConfigError("db", "give exactly one of db (a URL or a Django alias) or connection (a connection's name)")
    if connection is None:
        return check_db(db)
    info = resolve_connection(connection)
    if info.kind not in ("postgres", "sqlite"):
        raise ConfigError("connection", f"connection '{connection}' is a {info.kind} connection, not a database")
    return check_db(info.url)


def lineage_dataset(db: str, table: str) -> LineageDataset:
    """The OpenLineage dataset of `table` in `db` (a URL or a Django alias), named without credentials."""
    if "://" in db:
        return sql_url_dataset(db, table)
    from django.conf import settings

    conf = settings.DATABASES.get(db)
    if conf is None:
        raise ConfigError("db", f"no Django database alias {db!r}")
    engine = str(conf.get("ENGINE", ""))
    if "sqlite" in engine:
        return sqlite_dataset(path=str(conf.get("NAME") or ":memory:"), table=table)
    if "postgresql" in engine:
        return postgres_dataset(host=str(conf.get("HOST") or "localhost"), port=conf.get("PORT") or None,
                                database=str(conf.get("NAME") or "postgres"), table=table)
    raise ConfigError("db", f"no lineage naming for database {db!r} ({engine})")


class _Db:
    """One open connection with what statements need to know about it."""

    def __init__(self, dialect: str, conn: Any, *, style: str, owned: bool, alias: str | None = None,
                 url: str | None = None):
        self.url = url  # a PostgreSQL URL whose connection goes back to the pool on close
        self.dialect = dialect
        self.conn = conn
        self.style = style  # "qmark" (sqlite3) or "format" (psycopg, Django cursors)
        self.owned = owned
        self.alias = alias

    def param(self, name: str | None = None) -> str:
        if self.style == "qmark":
            return f":{name}" if name else "?"
        return f"%({name})s" if name else "%s"

    def value(self, value: Any) -> Any:
        """A bind value as this database wants it."""
        if self.dialect == SQLITE:
            return sql_text_value(value)
        if isinstance(value, datetime):
            return to_utc(value)
        if isinstance(value, (dict, list, tuple)):
            return sql_text_value(value)
        return value

    def bound(self, value: Any) -> Any:
        """A window bound: ISO text for SQLite, datetime for PostgreSQL."""
        if isinstance(value, datetime):
            return iso_utc(value) if self.dialect == SQLITE else to_utc(value)
        return value

    def cursor(self) -> Any:
        return self.conn.cursor()

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        if self.alias is not None:
            from django.db import transaction

            with transaction.atomic(using=self.alias):
                yield
        elif self.dialect == SQLITE:
            # IMMEDIATE takes the write lock up front, so two writers wait
            # for each other (busy timeout) instead of one failing on upgrade.
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        else:
            with self.conn.transaction():
                yield

    def close(self) -> None:
        if self.owned and self.url is not None:
            sql_pool.give_back(self.url, self.conn)  # kept for the next window (sql_pool.py)
        elif self.owned:
            self.conn.close()


def connect(db: str, *, create: bool = False) -> _Db:
    """Open `db` (URL or Django alias). A SQLite file is created only if `create`."""
    if "://" not in db:
        return _connect_alias(db)
    scheme = db.split("://", 1)[0].lower()
    dialect = _URL_SCHEMES[scheme]
    if dialect == SQLITE:
        import dj_database_url

        path = dj_database_url.parse(db)["NAME"] or ":memory:"
        if sqlite3.sqlite_version_info < _MIN_SQLITE:
            raise ConfigError("db", f"SQLite {sqlite3.sqlite_version} is too old; upserts need 3.24+")
        mode = "rwc" if create else "rw"
        try:
            conn = sqlite3.connect(f"file:{url_quote(path)}?mode={mode}", uri=True, timeout=30, isolation_level=None)
        except sqlite3.OperationalError as exc:
            raise EtlError(in_context(exc, f"while opening the SQLite database {path!r}")) from exc
        return _Db(SQLITE, conn, style="qmark", owned=True)
    import psycopg

    conn = sql_pool.take(db)
    if conn is None:
        try:
            # no prepared statements on the server: DISCARD ALL (sql_pool.give_back) would drop them under psycopg
            conn = psycopg.connect(db, autocommit=True, connect_timeout=10, prepare_threshold=None)
        except psycopg.Error as exc:
            # a driver's message may quote the connection string it was given: its password goes first
            password = urlsplit(db).password
            text = in_context(exc, f"while connecting to {redact(db)}")
            raise EtlError(text.replace(password, "***") if password else text) from exc
    return _Db(POSTGRESQL, conn, style="format", owned=True, url=db)


def _connect_alias(alias: str) -> _Db:
    from django.db import connections
    from django.utils.connection import ConnectionDoesNotExist

    try:
        conn = connections[alias]
    except ConnectionDoesNotExist:
        raise ConfigError("db", f"no Django database alias {alias!r}") from None
    if conn.vendor not in (SQLITE, POSTGRESQL):
        raise ConfigError("db", f"database {alias!r} is {conn.vendor}; only SQLite and PostgreSQL are supported")
    return _Db(conn.vendor, conn, style="format", owned=False, alias=alias)


def _column_names(description: Sequence[Any]) -> list[str]:
    return [getattr(d, "name", None) or d[0] for d in description]
