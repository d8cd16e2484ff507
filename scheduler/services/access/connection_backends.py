"""Secrets backends: where a connection's URL and secrets come from, tried in the order of ETL_SECRETS_BACKENDS.

The interface, for a team that adds one (Vault, a cloud secret manager):

    class VaultBackend(SecretsBackend):
        name = "vault"

        def get(self, connection):               # the Connection row: name, owner, kind
            secret = my_vault.read(f"etl/{connection.name}")
            return secret["url"] if secret else None   # a URL, a ConnectionInfo, or None: ask the next

    ETL_SECRETS_BACKENDS=myteam.backends.VaultBackend,scheduler.services.access.connection_backends.DatabaseBackend

A backend is built once per process with no arguments; `get` is called for
each resolution (cache inside if the store is slow), and must not log what
it returns. The Connection row always comes from the database: it says whose
the connection is and what kind, whatever backend holds its secrets.

This module imports no other service but crypto.
"""
from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from scheduler.models import Connection
from scheduler.pipelines.connections import ConnectionInfo
from scheduler.services.common.crypto import decrypt


class SecretsBackend:
    """Answers a connection's URL (or a ConnectionInfo), or None to let the next backend answer."""

    name = "backend"

    def get(self, connection: Connection) -> str | ConnectionInfo | None:
        raise NotImplementedError


class EnvironmentBackend(SecretsBackend):
    """`ETL_CONN_<NAME>`: the connection as a URL in the process environment (upper-case name)."""

    name = "environment"

    def get(self, connection: Connection) -> str | None:
        return os.environ.get(f"ETL_CONN_{connection.name.upper()}") or None


class FilesBackend(SecretsBackend):
    """`ETL_CONNECTIONS_DIR/<name>`: a mounted file (Kubernetes or Docker secrets) holding the URL."""

    name = "files"

    def get(self, connection: Connection) -> str | None:
        folder = getattr(settings, "ETL_CONNECTIONS_DIR", "")
        if not folder:
            return None
        path = Path(folder) / connection.name  # the name is [a-z0-9_]: no path of its own
        try:
            return path.read_text(encoding="utf-8").strip() or None
        except (FileNotFoundError, IsADirectoryError):
            return None


class DatabaseBackend(SecretsBackend):
    """The Connection row's own fields, its secrets decrypted (services/crypto.py)."""

    name = "database"

    def get(self, connection: Connection) -> ConnectionInfo | None:
        secret: dict[str, Any] = json.loads(decrypt(connection.secret)) if connection.secret else {}
        if not (connection.host or connection.database or secret):
            return None  # declared only: its URL is expected from another backend
        return ConnectionInfo(
            name=connection.name, kind=connection.kind, scheme=connection.scheme, host=connection.host,
            port=connection.port, database=connection.database, login=connection.login,
            password=secret.get("password", ""), extra=dict(connection.extra or {}),
            secret_extra=dict(secret.get("extra") or {}), source=self.name)


@lru_cache(maxsize=8)
def _load(paths: tuple[str, ...]) -> tuple[SecretsBackend, ...]:
    return tuple(import_string(path)() for path in paths)


def backends() -> tuple[SecretsBackend, ...]:
    """The backends of ETL_SECRETS_BACKENDS, in order (built once per process and list)."""
    return _load(tuple(settings.ETL_SECRETS_BACKENDS))


__all__ = ["DatabaseBackend", "EnvironmentBackend", "FilesBackend", "SecretsBackend", "backends"]
