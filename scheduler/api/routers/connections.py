"""/api/v1/connections: a team's credentials, write-only (docs/security.md, "Connections").

A connection's secrets (its password, a URL's password, secret extras) are
set here and never answered: every response says only which are set (`***`).
"""
from __future__ import annotations

from typing import Any

from ninja import Field, Router, Schema, Status

from scheduler.api.common import caller, errors, require
from scheduler.api.schemas import Strict
from scheduler.models import Connection
from scheduler.services.access.connections import connection_delete, connection_get, connection_set, connection_shown
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import visible_team_ids

router = Router(tags=["connections"])


class ConnectionOut(Schema):
    name: str
    owner: str
    kind: str
    description: str
    scheme: str
    host: str
    port: int | None
    database: str
    login: str
    extra: dict[str, Any]
    password: str = Field(description='"***" when a password is set, else "": never the password itself.')
    secret_extra: dict[str, str] = Field(description="Names of the secret extra fields, each shown as ***.")


class ConnectionIn(Strict):
    owner: str = None
    kind: str = None
    description: str = None
    url: str = Field(default=None, description="Its URL, password included (write-only): postgresql://u:p@h/db.")
    scheme: str = None
    host: str = None
    port: int | None = None
    database: str = None
    login: str = None
    extra: dict[str, str | int | float | bool] = None
    password: str = Field(default=None, description="Write-only; \"\" clears it, leaving it out keeps it.")
    secret_extra: dict[str, str] = Field(default=None, description="Secret extra fields (write-only).")
    reason: str = ""


class ConnectionCreate(ConnectionIn):
    name: str


@router.get("/connections", response={200: list[ConnectionOut], **errors()}, summary="List connections")
def list_connections(request):
    require(request, "scheduler.view_connection")
    qs = Connection.objects.select_related("owner").order_by("name")
    visible = visible_team_ids(caller(request))
    if visible is not None:
        qs = qs.filter(owner_id__in=visible)
    return [connection_shown(c) for c in qs[:1000]]


@router.get("/connections/{name}", response={200: ConnectionOut, **errors()}, summary="Get a connection")
def get_connection(request, name: str):
    connection = connection_get(name)
    require(request, "scheduler.view_connection", connection)
    return connection_shown(connection)


def _save(request, name: str, payload: ConnectionIn):
    data = payload.model_dump(exclude_unset=True)
    data.pop("name", None)
    reason = data.pop("reason", "")
    saved = connection_set(name=name, actor=caller(request), reason=reason, **data)
    return connection_shown(connection_get(saved.name))


@router.post("/connections", response={201: ConnectionOut, **errors()}, summary="Create a connection")
def create_connection(request, payload: ConnectionCreate):
    require(request, "scheduler.add_connection")
    if Connection.objects.filter(name=payload.name).exists():
        raise ServiceError(f"a connection named '{payload.name}' already exists", field="name")
    return Status(201, _save(request, payload.name, payload))


@router.patch("/connections/{name}", response={200: ConnectionOut, **errors()}, summary="Change a connection")
def update_connection(request, name: str, payload: ConnectionIn):
    require(request, "scheduler.change_connection", connection_get(name))
    return _save(request, name, payload)


@router.delete("/connections/{name}", response={204: None, **errors()}, summary="Delete a connection")
def delete_connection(request, name: str, reason: str = ""):
    connection = connection_get(name)
    require(request, "scheduler.delete_connection", connection)
    connection_delete(connection=connection, actor=caller(request), reason=reason)
    return Status(204, None)
