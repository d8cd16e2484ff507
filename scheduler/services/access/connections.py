"""Connections: a team's credentials, stored once (secrets encrypted, write-only), used by name.

Every door (the admin, the API, `manage.py connection`, the Python facade)
saves through `connection_set` / `connection_delete`: checked, authorized,
audited with the secret values masked, never shown back. A run resolves a
connection through `connection_resolve`: the secrets backends in order
(connection_backends.py), refused unless the run's schedule belongs to the
connection's team (permissions.may_use_connection, asked when the schedule
is saved and when it runs), and its secrets registered with the masker.
"""
from __future__ import annotations

import json
import re
import urllib.parse
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.core import ConfigError
from scheduler.core.masking import MASK
from scheduler.models import Connection, ConnectionKind, Schedule, Team
from scheduler.permissions import ALL_TEAMS, acts_for_all, connection_refusal, may_use_connection, member_team_ids
from scheduler.pipelines.connections import ConnectionInfo, parse_url
from scheduler.services.common.audit import audit_record, audit_refusal
from scheduler.services.access.connection_backends import backends
from scheduler.services.common.crypto import decrypt, encrypt, rotate
from scheduler.services.common.errors import NotFound, ServiceError, check_text
from scheduler.services.common.masking import mask_register
from scheduler.services.access.teams import PermissionRefused, authorize, resolve_user

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
FIELDS = ("scheme", "host", "port", "database", "login")
ENV_PARTS = (("URL", "url"), ("KIND", "kind"), ("SCHEME", "url_scheme"), ("HOST", "host"), ("PORT", "port"),
             ("USER", "login"), ("PASSWORD", "password"), ("DATABASE", "database"))
SECRET_PARTS = frozenset({"URL", "PASSWORD"})  # what holds a secret; dbt gets these as DBT_ENV_SECRET_* only


def connection_get(name: Any) -> Connection:
    # a name is [a-z0-9_]: nothing else is looked up; the answer does not echo what was asked (a path may hold
    # any text, and another team's names are not to be confirmed or repeated)
    found = Connection.objects.select_related("owner").filter(name=name).first() \
        if isinstance(name, str) and NAME_RE.match(name) else None
    if found is None:
        raise NotFound("no such connection", field="connection")
    return found


def connection_shown(connection: Connection) -> dict[str, Any]:
    """A connection as every door shows it: its fields, and of its secrets only which ones are set (`***`)."""
    secret = _secret_fields(connection)
    return {"name": connection.name, "owner": connection.owner.name, "kind": connection.kind,
            "description": connection.description, **{f: getattr(connection, f) for f in FIELDS},
            "extra": dict(connection.extra or {}), "password": MASK if secret.get("password") else "",
            "secret_extra": {key: MASK for key in secret.get("extra") or {}}}


def _secret_fields(connection: Connection) -> dict[str, Any]:
    """The stored secrets of the row (the database backend's), decrypted."""
    return json.loads(decrypt(connection.secret)) if connection.secret else {}


# --- resolving, for a run ------------------------------------------------------------------

def connection_resolve(name: str, *, schedule: Schedule | None) -> ConnectionInfo:
    """The connection `name` from the first backend that has it; refused unless `schedule` may use it
    (None: not for a run, a shell's own use). Its secrets are registered with the masker before it returns."""
    connection = connection_get(name)
    if schedule is not None and not may_use_connection(schedule.owner_id, connection):
        raise PermissionRefused(connection_refusal(f"schedule '{schedule.name}'", name), field="connection")
    for backend in backends():
        value = backend.get(connection)
        if value is None:
            continue
        try:
            info = value if isinstance(value, ConnectionInfo) else parse_url(name, value, kind=connection.kind,
                                                                              source=backend.name)
        except ConfigError as exc:
            raise ServiceError(f"{exc.problem} (from the {backend.name} backend)", field=exc.field) from None
        mask_register(*info.secrets())  # and so their URL-quoted forms (a password in a URL)
        return info
    raise ServiceError(f"connection '{name}' has no URL or fields in any backend (set ETL_CONN_{name.upper()}, "
                       f"a file {name} in ETL_CONNECTIONS_DIR, or its fields)", field="connection")


def connections_env(names: list[str], *, schedule: Schedule, for_dbt: bool = False) -> dict[str, str]:
    """ETL_CONN_<NAME>_{URL,KIND,SCHEME,HOST,PORT,USER,PASSWORD,DATABASE} and ETL_CONN_<NAME>_<EXTRA> of each
    declared connection. dbt gets the secret parts only as DBT_ENV_SECRET_ETL_CONN_<NAME>_*: dbt scrubs those
    from its logs and refuses them outside profiles.yml."""
    env: dict[str, str] = {}
    for name in names:
        info = connection_resolve(name, schedule=schedule)
        prefix = f"ETL_CONN_{name.upper()}_"
        for part, attribute in ENV_PARTS:
            value = getattr(info, attribute)
            key = f"DBT_ENV_SECRET_{prefix}{part}" if for_dbt and part in SECRET_PARTS else f"{prefix}{part}"
            env[key] = "" if value is None else str(value)
        for key, value in {**info.extra, **info.secret_extra}.items():
            suffix = re.sub(r"[^A-Z0-9_]", "_", str(key).upper())
            secret = key in info.secret_extra
            env[f"DBT_ENV_SECRET_{prefix}{suffix}" if for_dbt and secret else f"{prefix}{suffix}"] = str(value)
    return env


def connections_check(schedule: Schedule, names: list[str], *, field: str) -> None:
    """At save: every declared connection exists and belongs to the schedule's team; ServiceError naming it."""
    for name in names:
        connection = Connection.objects.filter(name=name).first()
        if connection is None:
            raise ServiceError(f"unknown connection '{name}'", field=field)
        if not may_use_connection(schedule.owner_id, connection):
            raise ServiceError(connection_refusal(f"schedule '{schedule.name}'", name), field=field)


def connection_channel_url(url: str, *, owner_id: int | None, who: str) -> str:
    """The Apprise URL an alert channel `conn://NAME?to=ops@example.com` stands for: a mailto(s):// URL with
    the smtp connection's server and login, the channel's own query (to, cc, from, ...) kept. Only the owning
    team's schedules and team channels may name it; the password is registered with the masker."""
    parts = urllib.parse.urlsplit(url)
    name = parts.hostname or ""
    connection = Connection.objects.filter(name=name).first()
    if connection is None:
        raise ServiceError(f"conn://{name}: unknown connection '{name}'", field="alert_channels")
    if not may_use_connection(owner_id, connection):
        raise ServiceError(connection_refusal(who, name), field="alert_channels")
    if connection.kind != ConnectionKind.SMTP:
        raise ServiceError(f"conn://{name}: an alert channel names an smtp connection, not a {connection.kind} one",
                           field="alert_channels")
    info = connection_resolve(name, schedule=None)
    userinfo = urllib.parse.quote(info.login, safe="") + (":" + urllib.parse.quote(info.password, safe="")
                                                          if info.password else "")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query.append(("smtp", info.host))
    if info.extra.get("mode"):
        query.append(("mode", str(info.extra["mode"])))
    scheme = "mailto" if info.url_scheme == "smtp" else "mailtos"
    netloc = (f"{userinfo}@" if userinfo else "") + info.host + (f":{info.port}" if info.port else "")
    return urllib.parse.urlunsplit((scheme, netloc, "", urllib.parse.urlencode(query), ""))


def resolve_for_pipelines(name: str, scope: Any) -> ConnectionInfo:
    """The resolver pipelines use (pipelines/connections.py), installed at start-up: for the run in scope."""
    try:
        return connection_resolve(name, schedule=scope)
    except ServiceError as exc:
        raise ConfigError(exc.field or "connection", exc.problem) from None


# --- changing them ---------------------------------------------------------------------------

def _authorize(actor: Any, perm: str, connection: Connection | None, team: Team) -> None:
    authorize(actor=actor, perm=perm, obj=connection if connection is not None and connection.pk else None)
    user = resolve_user(actor)
    if user is None or acts_for_all(user) or team.pk in member_team_ids(user):
        return
    message = (f"permission denied: {user.get_username()} may not give connection "
               f"'{connection.name if connection else ''}' to team '{team.name}': not a member")
    audit_refusal(user=user, perm=perm, target=connection if connection is not None and connection.pk else None,
                  reason=message)
    raise PermissionRefused(message)


def _check_fields(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("scheme", "host", "database", "login", "description"):
        if values.get(key) is not None:
            limit = Connection._meta.get_field(key).max_length
            out[key] = check_text(values[key], field=key, max_length=limit).strip()
    if "port" in values:
        port = values["port"]
        if port not in (None, "") and (isinstance(port, bool) or not str(port).isdigit() or not 0 < int(port) < 65536):
            raise ServiceError(f"must be a port number from 1 to 65535, got {port!r}", field="port")
        out["port"] = int(port) if port not in (None, "") else None
    if values.get("extra") is not None:
        extra = values["extra"]
        if not isinstance(extra, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float, bool))
                                                  for k, v in extra.items()):
            raise ServiceError("must be an object of name: text or number", field="extra")
        for key, value in extra.items():
            check_text(key, field="extra", max_length=100)
            check_text(value, field=f"extra.{key}", max_length=1000)
        out["extra"] = dict(extra)
    return out


def connection_set(*, name: str, actor: Any, owner: Team | str | None = None, kind: str | None = None,
                   url: str | None = None, password: str | None = None, secret_extra: dict | None = None,
                   reason: str = "", now: datetime | None = None, **fields: Any) -> Connection:
    """Create or change connection `name`. `url` (its password included) sets its fields at once; `password`
    and `secret_extra` set the secrets (None keeps them, "" clears the password). Audited, secrets masked."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ServiceError("must be lower-case letters, digits and _, starting with a letter (at most 63)",
                           field="name")
    unknown = sorted(set(fields) - {*FIELDS, "description", "extra"})
    if unknown:
        raise ServiceError("unknown field", field=unknown[0])
    values = dict(fields)
    if url is not None:
        try:
            parsed = parse_url(name, check_text(url, field="url"), kind=kind)
        except ConfigError as exc:
            raise ServiceError(exc.problem, field="url") from None
        kind = kind or parsed.kind
        values.update({f: getattr(parsed, f) for f in FIELDS}, extra={**parsed.extra, **(fields.get("extra") or {})})
        password = parsed.password if password is None and parsed.password else password
        secret_extra = {**parsed.secret_extra, **(secret_extra or {})} or None
    values = _check_fields(values)
    if kind is not None and kind not in ConnectionKind.values:
        raise ServiceError(f"must be one of {', '.join(ConnectionKind.values)}", field="kind")
    if password is not None:
        check_text(password, field="password")
    if secret_extra is not None and not (isinstance(secret_extra, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in secret_extra.items())):
        raise ServiceError("must be an object of name: text", field="secret_extra")
    for key, value in (secret_extra or {}).items():
        check_text(key, field="secret_extra", max_length=100)
        check_text(value, field=f"secret_extra.{key}")
    now = now or timezone.now()
    with transaction.atomic():
        connection = Connection.objects.select_for_update().filter(name=name).first()
        creating = connection is None
        if isinstance(owner, str):
            owner = Team.objects.filter(name=owner).first() or _unknown_team(owner)
        if creating:
            team = owner or Team.objects.get(pk=Team.default_team_id())
            _authorize(actor, "scheduler.add_connection", None, team)
            connection = Connection(name=name, owner=team, kind=kind or ConnectionKind.GENERIC)
            before = None
        else:
            _authorize(actor, "scheduler.change_connection", connection, owner or connection.owner)
            before = connection_shown(connection)
            if owner is not None:
                connection.owner = owner
            if kind is not None:
                connection.kind = kind
        for key, value in values.items():
            setattr(connection, key, value)
        if password is not None or secret_extra is not None:
            secret = _secret_fields(connection) if connection.secret else {}
            if password is not None:
                secret["password"] = password
            if secret_extra is not None:
                secret["extra"] = dict(secret_extra)
            secret = {k: v for k, v in secret.items() if v}
            mask_register(secret.get("password"), *(secret.get("extra") or {}).values())
            connection.secret = encrypt(json.dumps(secret)) if secret else ""
        connection.save()
        after = connection_shown(connection)
        changed = {k: v for k, v in after.items() if before is None or before.get(k) != v}
        if password is not None and not creating:
            changed["password"] = after["password"] or "(cleared)"  # it changed, whatever the mask shows
        if creating or changed:
            audit_record(actor=actor, action="connection.create" if creating else "connection.update",
                         target=connection, before=None if before is None else {k: before.get(k) for k in changed},
                         after=changed, reason=check_text(reason, field="reason", max_length=500), at=now)
    return connection


def _unknown_team(name: str):
    raise ServiceError(f"unknown team '{name}'", field="owner")


def connection_delete(*, connection: Connection, actor: Any, reason: str = "", now: datetime | None = None) -> None:
    """Delete a connection no schedule declares; audited."""
    authorize(actor=actor, perm="scheduler.delete_connection", obj=connection)
    users = [s.name for s in Schedule.objects.only("name", "command", "dbt").order_by("name")
             if connection.name in ((s.command or {}).get("connections") or [])
             or connection.name in ((s.dbt or {}).get("connections") or [])]
    if users:
        raise ServiceError(f"connection '{connection.name}' is used by {', '.join(users[:10])}; remove it from "
                           "their connections first", field="connection")
    with transaction.atomic():
        audit_record(actor=actor, action="connection.delete", target=connection, before=connection_shown(connection),
                     reason=check_text(reason, field="reason", max_length=500), at=now or timezone.now())
        connection.delete()


def connections_rotate_key(*, actor: Any, now: datetime | None = None) -> dict[str, int]:
    """Re-encrypt every stored secret (connections, command env values marked secret) under the first key of
    ETL_CONNECTION_KEYS; the older keys may then leave. One transaction; audited with the counts."""
    authorize(actor=actor, perm=ALL_TEAMS)  # every team's secrets: an act for all teams
    counts = {"connections": 0, "command_secrets": 0}
    with transaction.atomic():
        for connection in Connection.objects.select_for_update().exclude(secret=""):
            Connection.objects.filter(pk=connection.pk).update(secret=rotate(connection.secret))
            counts["connections"] += 1
        for schedule in Schedule.objects.select_for_update().exclude(command={}).only("pk", "command"):
            env = (schedule.command or {}).get("env") or {}
            sealed = {k: {"encrypted": rotate(v["encrypted"])} for k, v in env.items()
                      if isinstance(v, dict) and set(v) == {"encrypted"}}
            if sealed:
                command = {**schedule.command, "env": {**env, **sealed}}
                Schedule.objects.filter(pk=schedule.pk).update(command=command)
                counts["command_secrets"] += len(sealed)
        audit_record(actor=actor, action="connection.rotate_key", target=("connection", "*"), after=counts,
                     at=now or timezone.now())
    return counts


__all__ = ["connection_channel_url", "connection_delete", "connection_get", "connection_resolve", "connection_set",
           "connection_shown", "connections_check", "connections_env", "connections_rotate_key",
           "resolve_for_pipelines"]
