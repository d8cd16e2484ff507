"""Which secrets the process knows, registered with the one masker (scheduler/core/masking.py).

At start-up (`SchedulerConfig.ready`) the server's own: SECRET_KEY, the
password of every database (DATABASE_URL) and of REDIS_URL, the metrics and
event tokens, the alert webhook secret, the connection keys, and any variable
of the process environment whose name says it holds one (`*PASSWORD*`,
`*SECRET*`, `*TOKEN*`, `*API_KEY*`, ...; a connection's `ETL_CONN_<NAME>`
URL). The connections service adds a connection's secrets when it resolves
or sets one; a run adds its command's env values marked secret. The masked
model fields (scheduler/models/fields.py) then replace each of them by `***`
in whatever is written.

This module imports no other service: it is plumbing every layer may use.
"""
from __future__ import annotations

import os
import re
import urllib.parse
from typing import Any

from django.conf import settings

from scheduler.core.masking import MASK, masker

#: names of environment variables that hold a secret (Airflow's sensitive names, as parts of a name)
SENSITIVE_NAME = re.compile(r"PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|CREDENTIAL|ACCESS_?KEY",
                            re.IGNORECASE)


def url_secrets(url: Any) -> list[str]:
    """The password of a URL (`scheme://user:PASSWORD@host`), raw and unquoted; empty when it has none."""
    if not isinstance(url, str) or "://" not in url:
        return []
    try:
        password = urllib.parse.urlsplit(url.strip()).password
    except ValueError:
        return []
    return [password, urllib.parse.unquote(password)] if password else []


def server_secrets(environ: dict[str, str] | None = None) -> list[str]:
    """Every secret of the server's own: its settings' and its environment's."""
    environ = os.environ if environ is None else environ
    found: list[str] = [settings.SECRET_KEY, getattr(settings, "ETL_METRICS_TOKEN", ""),
                        getattr(settings, "ETL_ALERT_WEBHOOK_SECRET", ""), getattr(settings, "EMAIL_HOST_PASSWORD", ""),
                        *getattr(settings, "ETL_EVENT_TOKENS", []), *getattr(settings, "ETL_CONNECTION_KEYS", [])]
    for database in settings.DATABASES.values():
        found.append(str(database.get("PASSWORD") or ""))
    found += url_secrets(getattr(settings, "REDIS_URL", ""))
    for url in getattr(settings, "ETL_ALERT_URLS", []):
        found += url_secrets(url)
    names = set(getattr(settings, "ETL_SERVER_SECRET_NAMES", ()))
    for name, value in environ.items():
        if name in names or name.startswith("ETL_CONN_") or SENSITIVE_NAME.search(name):
            found += [value, *url_secrets(value)]
        elif "://" in value:
            found += url_secrets(value)  # a URL's password, whatever the variable's name
    return [secret for secret in found if secret]


def mask_register_server() -> None:
    """Register the server's own secrets (at start-up; again after the settings change, in tests)."""
    masker.add_all(server_secrets())


def mask_register(*secrets: Any) -> None:
    """Register secrets the process has just learnt (a connection's, a command's env values marked secret)."""
    masker.add_all(secrets)


def mask_text(text: str) -> str:
    return masker.mask(text)


def mask_data(value: Any) -> Any:
    return masker.mask_data(value)


__all__ = ["MASK", "mask_data", "mask_register", "mask_register_server", "mask_text", "server_secrets",
           "url_secrets"]
