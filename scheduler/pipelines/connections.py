"""Connections as pipelines use them: by name, resolved for the run that builds the pipeline.

`resolve_connection("warehouse")` answers a `ConnectionInfo` (URL and parts)
through the resolver the scheduler installs at start-up
(scheduler/services/access/connections.py): it looks the connection up in the
secrets backends and refuses one that the running schedule's team does not
own. `SqlSource(connection=...)`, `SqlSink(connection=...)` and
`HttpJsonSource(connection=...)` call it. This module has no Django in it.
"""
from __future__ import annotations

import contextvars
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from scheduler.core import ConfigError

#: a kind's URL scheme when the connection names none
DEFAULT_SCHEMES = {"postgres": "postgresql", "sqlite": "sqlite", "http": "https", "smtp": "smtps"}
#: a URL's scheme -> the kind of connection it speaks for
KIND_OF_SCHEME = {"postgres": "postgres", "postgresql": "postgres", "sqlite": "sqlite", "http": "http",
                  "https": "http", "smtp": "smtp", "smtps": "smtp"}
#: query keys of a URL that are secret (kept with the password, never shown)
SECRET_KEYS = frozenset({"password", "token", "secret", "api_key", "apikey", "access_token", "private_key"})


@dataclass(frozen=True)
class ConnectionInfo:
    """One connection's fields, secrets included: never log it (its repr hides them)."""

    name: str
    kind: str
    scheme: str = ""
    host: str = ""
    port: int | None = None
    database: str = ""
    login: str = ""
    password: str = field(default="", repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    secret_extra: dict[str, str] = field(default_factory=dict, repr=False)
    source: str = ""  # the backend that answered: environment, files, database, ...

    @property
    def url_scheme(self) -> str:
        return self.scheme or DEFAULT_SCHEMES.get(self.kind, "")

    def url_without_password(self) -> str:
        return self._url(with_password=False)

    def base_url(self) -> str:
        """The URL without credentials or query (an HTTP service's base)."""
        return self._url(with_password=False, with_login=False, with_query=False)

    @property
    def url(self) -> str:
        """The connection as one URL, password included (what a driver takes)."""
        return self._url(with_password=True)

    def _url(self, *, with_password: bool, with_login: bool = True, with_query: bool = True) -> str:
        scheme = self.url_scheme
        if self.kind == "sqlite":
            return f"sqlite:///{self.database}"
        userinfo = urllib.parse.quote(self.login, safe="") if self.login and with_login else ""
        if self.password and with_password:
            userinfo += ":" + urllib.parse.quote(self.password, safe="")
        host = f"[{self.host}]" if ":" in self.host else self.host
        netloc = (f"{userinfo}@" if userinfo else "") + host + (f":{self.port}" if self.port else "")
        path = self.database if self.database.startswith("/") or not self.database else "/" + self.database
        query = urllib.parse.urlencode({k: v for k, v in self.extra.items() if isinstance(v, (str, int, float))
                                        and k != "headers"}) if with_query else ""
        return urllib.parse.urlunsplit((scheme, netloc, path, query, ""))

    def secrets(self) -> list[str]:
        """Every secret value of it, for the masker."""
        return [value for value in (self.password, *self.secret_extra.values()) if value]


def parse_url(name: str, url: str, *, kind: str | None = None, source: str = "") -> ConnectionInfo:
    """A connection from its URL (`postgresql://user:pw@host:5432/db?sslmode=require`); ConfigError naming
    the connection (never quoting the URL, which holds the password) when it is not one."""
    text = url.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError:
        raise ConfigError(f"connection '{name}'", "is not a URL such as postgresql://user:pw@host/db") from None
    if not parts.scheme or "://" not in text:
        raise ConfigError(f"connection '{name}'", "is not a URL such as postgresql://user:pw@host/db")
    scheme = parts.scheme.lower()
    found = KIND_OF_SCHEME.get(scheme, "generic")
    query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    if found == "sqlite":
        database = urllib.parse.unquote(text.split("://", 1)[1].removeprefix("/"))
    else:
        database = urllib.parse.unquote(parts.path.removeprefix("/")) if found == "postgres" else parts.path
    return ConnectionInfo(
        name=name, kind=kind or found, scheme="" if DEFAULT_SCHEMES.get(found) == scheme else scheme,
        host=parts.hostname or "", port=port, database=database,
        login=urllib.parse.unquote(parts.username or ""), password=urllib.parse.unquote(parts.password or ""),
        extra={k: v for k, v in query.items() if k.lower() not in SECRET_KEYS},
        secret_extra={k: v for k, v in query.items() if k.lower() in SECRET_KEYS}, source=source)


# --- resolving by name, for the run at hand -------------------------------------------------

Resolver = Callable[[str, Any], ConnectionInfo]
_resolver: Resolver | None = None
#: whose run is building pipelines now (the schedule), set by the worker around a run's target
_scope: contextvars.ContextVar[Any] = contextvars.ContextVar("etl_connection_scope", default=None)


def set_resolver(resolver: Resolver | None) -> None:
    """Install the resolver (the scheduler does at start-up)."""
    global _resolver
    _resolver = resolver


@contextmanager
def connection_scope(schedule: Any) -> Iterator[None]:
    """Resolve connections for `schedule`'s run inside: only its team's connections are answered."""
    token = _scope.set(schedule)
    try:
        yield
    finally:
        _scope.reset(token)


def resolve_connection(name: str) -> ConnectionInfo:
    """The connection `name`, for the run being built (ConfigError / a refusal naming it otherwise)."""
    if not isinstance(name, str) or not name:
        raise ConfigError("connection", "must be a connection's name")
    if _resolver is None:
        raise ConfigError("connection", f"cannot resolve connection '{name}': the scheduler is not set up")
    return _resolver(name, _scope.get())
