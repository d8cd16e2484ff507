"""The server's secrets and the connections' keys and backends: what a command may see (docs/security.md).

Part of the settings (etlsite/settings.py imports every name of `__all__`), kept apart for the reader who looks
for these alone.
"""
from __future__ import annotations

import re
from pathlib import Path

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from etlsite.env import envlist, envstr

__all__ = [
    "ETL_COMMAND_ENV_PASSTHROUGH",
    "ETL_CONNECTIONS_DIR",
    "ETL_CONNECTION_KEYS",
    "ETL_SECRETS_BACKENDS",
    "ETL_SERVER_SECRET_NAMES",
]

# The server's own secrets, by the names of the variables that hold them: a command or dbt run never gets one
# (its environment is built from scratch, docs/security.md "The command environment"), and their values are
# masked wherever text is written (runs' logs and errors, node records, the audit log, alerts).
ETL_SERVER_SECRET_NAMES = ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ETL_METRICS_TOKEN", "ETL_ALERT_WEBHOOK_SECRET",
                           "ETL_EVENT_TOKENS", "ETL_CONNECTION_KEYS", "EMAIL_HOST_PASSWORD", "ETL_ALERT_URLS")
# More variables of the worker's environment a command or dbt run gets, beyond PATH, HOME, LANG, LC_* and TZ:
# "DBT_PROFILES_DIR,PGSSLROOTCERT". Never a server secret above, nor a connection's ETL_CONN_* variable.
ETL_COMMAND_ENV_PASSTHROUGH = envlist("ETL_COMMAND_ENV_PASSTHROUGH", [])
for _name in ETL_COMMAND_ENV_PASSTHROUGH:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", _name):
        raise ImproperlyConfigured(f"ETL_COMMAND_ENV_PASSTHROUGH: {_name!r} is not a variable name")
    if _name in ETL_SERVER_SECRET_NAMES or _name.startswith("ETL_CONN_"):
        raise ImproperlyConfigured(f"ETL_COMMAND_ENV_PASSTHROUGH: {_name} holds a secret of the server or of a "
                                   "connection; a command gets connections it declares (command.connections)")
# Fernet keys that encrypt stored secrets (connections, command env values marked secret), comma-separated: the
# first encrypts, all decrypt; `manage.py connection rotate-key` re-encrypts under the first. Unset with SQLite: a
# development key derived from SECRET_KEY; unset with PostgreSQL: no secret can be stored in the database.
ETL_CONNECTION_KEYS = envlist("ETL_CONNECTION_KEYS", [])
for _i, _key in enumerate(ETL_CONNECTION_KEYS):
    try:
        Fernet(_key)
    except ValueError:
        raise ImproperlyConfigured(f"ETL_CONNECTION_KEYS: key {_i + 1} is not a Fernet key (32 url-safe "
                                   "base64-encoded bytes; `manage.py connection generate-key` makes one)") from None
# Where connections are looked up, in order (docs/security.md, "Connections"): the environment (ETL_CONN_<NAME> as
# a URL), a directory of mounted files (ETL_CONNECTIONS_DIR/<name>), the database. A team may add its own class.
ETL_SECRETS_BACKENDS = envlist("ETL_SECRETS_BACKENDS", [
    "scheduler.services.access.connection_backends.EnvironmentBackend",
    "scheduler.services.access.connection_backends.FilesBackend",
    "scheduler.services.access.connection_backends.DatabaseBackend",
])
ETL_CONNECTIONS_DIR = envstr("ETL_CONNECTIONS_DIR", "")
if ETL_CONNECTIONS_DIR and not Path(ETL_CONNECTIONS_DIR).is_absolute():
    raise ImproperlyConfigured(f"ETL_CONNECTIONS_DIR: must be an absolute path, got {ETL_CONNECTIONS_DIR!r}")
