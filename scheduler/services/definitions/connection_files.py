"""The `connections:` section of a schedules file: connections declared as code, secrets write-only.

```yaml
connections:
  - name: warehouse
    owner: analytics
    kind: postgres
    host: db.internal
    port: 5432
    database: dwh
    login: loader
    password: "***"        # keep the stored one; leave it out to keep it too; a value sets it
```

A file is usually in a repository, so its natural place for a password is
not the file: declare the connection here and let the environment or a
mounted file (ETL_CONN_<NAME>, ETL_CONNECTIONS_DIR/<name>) hold the URL, or
set the password once with `manage.py connection set --password-stdin`.
Each entry is saved through `connection_set` (authorized, audited masked);
the section is applied before the schedules, so they may name what it
declares. What is printed of it never holds a secret.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction

from scheduler.core.masking import MASK
from scheduler.models import Connection
from scheduler.services.access.connections import NAME_RE, connection_set, connection_shown
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import PermissionRefused

KEYS = frozenset({"name", "owner", "kind", "description", "scheme", "host", "port", "database", "login", "extra",
                  "password", "secret_extra"})


def _label(index: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    named = isinstance(name, str) and NAME_RE.match(name)
    return f"connections[{index}] ({name})" if named else f"connections[{index}]"


def _secret(value: Any, *, field: str) -> str | None:
    """A secret as the file gives it: None (absent or "***") keeps the stored one."""
    if value is None or value == MASK:
        return None
    if not isinstance(value, str):
        raise ServiceError("must be text (or \"***\" to keep the stored one)", field=field)
    return value


def connections_file_apply(entries: Any, *, actor: Any, reason: str) -> tuple[list[dict], list[tuple]]:
    """Save every entry (in the caller's transaction); ([{action, name, changes}], [(entry, field, problem)]).

    Any problem: nothing of the section is saved (the transaction is rolled back here) and the problems say
    which entry and field. The changes show fields, and of secrets only `***`."""
    if not isinstance(entries, list):
        return [], [("file", "connections", "must be a list of connections")]
    problems: list[tuple] = []
    changes: list[dict] = []
    with transaction.atomic():
        for index, entry in enumerate(entries):
            label = _label(index, entry)
            if not isinstance(entry, dict):
                problems.append((label, None, "must be a mapping of connection fields"))
                continue
            unknown = sorted(str(k) for k in set(entry) - KEYS)
            if unknown:
                problems.append((label, unknown[0][:40], f"unknown key (allowed: {', '.join(sorted(KEYS))})"))
                continue
            fields = {k: v for k, v in entry.items() if k not in ("name", "owner", "kind", "password", "secret_extra")}
            existing = Connection.objects.select_related("owner").filter(name=entry.get("name")).first() \
                if isinstance(entry.get("name"), str) else None
            before = connection_shown(existing) if existing is not None else None
            try:
                password = _secret(entry.get("password"), field="password")
                extras = entry.get("secret_extra")
                if extras is not None and not isinstance(extras, dict):
                    raise ServiceError("must be a mapping of name: text", field="secret_extra")
                masked = [k for k, v in (extras or {}).items() if v == MASK]
                if extras and masked and len(masked) < len(extras):
                    raise ServiceError("give every secret extra, or \"***\" for all of them", field="secret_extra")
                secret_extra = None if not extras or masked else extras  # all "***": the stored ones stay
                saved = connection_set(name=entry.get("name"), actor=actor, owner=entry.get("owner"),
                                       kind=entry.get("kind"), password=password, secret_extra=secret_extra,
                                       reason=reason, **fields)
            except PermissionRefused:
                raise  # the whole file is refused, as for a schedule of a team the actor may not edit
            except ServiceError as exc:
                problems += [(label, e.field, getattr(e, "problem", None) or str(e)) for e in exc.errors]
                continue
            after = connection_shown(saved)
            diff = {k: v for k, v in after.items() if before is None or before.get(k) != v}
            if password is not None and before is not None:
                diff["password"] = MASK
            action = "create" if before is None else "update" if diff else "unchanged"
            changes.append({"action": action, "name": saved.name, "changes": diff if before is not None else after})
        if problems:
            transaction.set_rollback(True)
    return ([] if problems else changes), problems


__all__ = ["connections_file_apply"]
