"""Small helpers shared by the semantics commands (backfill, watermark, reset_breaker, ...)."""
from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from scheduler.core import EtlError
from scheduler.services.definitions.schedules import schedule_get


def bad_input(exc: Exception | str) -> CommandError:
    """Exit status 2 with the service's message (which names the field)."""
    return CommandError(str(exc), returncode=2)


def dump(command, data: Any) -> None:
    command.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str))


def get_schedule(name: str):
    try:
        return schedule_get(name)
    except EtlError as exc:
        raise bad_input(exc) from None
