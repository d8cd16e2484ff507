"""Exporting schedules as a schedules file that `apply_schedules` reads back unchanged."""
from __future__ import annotations

import yaml

from scheduler.models import Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_yaml import FILE_VERSION
from scheduler.services.definitions.schedules import schedule_spec
from scheduler.services.integrations.channels import mask_url
from scheduler.services.worker.commands import command_spec_shown


class _Dumper(yaml.SafeDumper):
    """Block style for schedules, flow style for short JSON configs; keys in SCHEDULE_FIELDS order."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def schedules_export(names: list[str] | None = None) -> str:
    """The schedules (all, or those named) as a schedules file that `apply_schedules` reads back unchanged.

    Channel URLs are written masked (`alert_channels`); applying the file back keeps each stored URL whose
    masked form it finds, so a token never lands in a file or a repository.
    """
    qs = Schedule.objects.select_related("workload_class").prefetch_related("depends_on").order_by("name")
    if names:
        missing = sorted(set(names) - set(qs.filter(name__in=names).values_list("name", flat=True)))
        if missing:
            raise ServiceError(f"unknown schedule '{missing[0]}'", field="schedule")
        qs = qs.filter(name__in=names)
    specs = [schedule_spec(s, depends_on=[u.name for u in s.depends_on.all()]) for s in qs]
    for spec in specs:  # secrets in channel URLs stay out of files; applying a masked URL keeps the stored one
        spec["alert_channels"] = [mask_url(url) for url in spec["alert_channels"]]
        spec["command"] = command_spec_shown(spec["command"])  # so do env values marked secret
    body = yaml.dump({"version": FILE_VERSION, "schedules": specs}, Dumper=_Dumper, sort_keys=False,
                     allow_unicode=True, default_flow_style=False, width=120)
    return ("# Schedules as code: apply with `python manage.py apply_schedules FILE [--dry-run] [--prune]`.\n"
            "# Every field is listed; a field left out of an entry takes its default.\n" + body)


__all__ = ["schedules_export"]
