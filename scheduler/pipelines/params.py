"""What run params a pipeline takes: a declared schema, checked at every door that takes params.

Run params are data (a day, an order id, a list of records), never where
to read or write: paths, hosts and connection strings come from the schedule
definition or the settings. A pipeline declares its params as a pydantic
model derived from `Params`; a key the model does not list is refused, and
so is a value of the wrong type, with a message that names the key:

    class ReportParams(Params):
        day: datetime.date | None = None

    register_pipeline("shop.report", factory, params=ReportParams)

A pipeline registered without `params` takes any JSON object (a project's
own pipelines keep working); every built-in pipeline declares its schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scheduler.core import ConfigError
from scheduler.core.userdata import excerpt


class Params(BaseModel):
    """The base of a pipeline's params schema: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_schema(schema: Any, owner: str) -> type[Params] | None:
    """`schema` when it is None or a Params model (what register_pipeline accepts)."""
    if schema is None or (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return schema
    raise ConfigError("params", f"the params schema of {owner!r} must be a pydantic model (derive from Params)")


def check_params(schema: type[BaseModel] | None, params: dict[str, Any], *, field: str = "params") -> None:
    """ConfigError naming `field.key` for an unknown key or a value of the wrong type (no schema: any object fits)."""
    if schema is None:
        return
    try:
        schema.model_validate(params)
    except ValidationError as exc:
        # a key left out is not refused here: a schedule's own params and a run's overrides are each a part
        # of the params, and the pipeline says what it misses when it runs
        errors = [e for e in exc.errors(include_url=False, include_input=False) if e.get("type") != "missing"]
        if not errors:
            return
        error = errors[0]
        loc = ".".join(excerpt(part, 40) for part in error.get("loc", ()))
        where = f"{field}.{loc}" if loc else field
        if error.get("type") == "extra_forbidden":
            allowed = ", ".join(schema.model_fields) or "none"
            raise ConfigError(where, f"unknown key (this pipeline takes: {allowed})") from None
        raise ConfigError(where, str(error.get("msg", "is not valid"))) from None
