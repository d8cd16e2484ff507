"""The next fires of a trigger as it is being edited (issue 37): the admin's schedule form asks this as the
trigger's fields change (htmx), so a cron expression is checked, and its fires seen, before it is saved."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.shortcuts import render
from django.utils import timezone

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.triggers.registry import get_trigger
from scheduler.views.common import page

PREVIEW_FIRES = 5
MAX_CONFIG_CHARS = 10_000


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError("timezone", f"unknown time zone '{name[:64]}' (an IANA name, e.g. Europe/Berlin)") from None


def trigger_fires(kind: str, config_text: str, zone_name: str, *, now, count: int = PREVIEW_FIRES) -> dict:
    """{"fires": [{"local", "utc"}], "description", "time_based"} or {"error": "field: problem"}."""
    try:
        if len(config_text) > MAX_CONFIG_CHARS:
            raise ConfigError("trigger_config", f"is longer than {MAX_CONFIG_CHARS:,} characters")
        plugin = get_trigger(kind)
        zone = _zone(zone_name)
        config = parse_json(config_text, field="trigger_config") if config_text.strip() else {}
        config = plugin.validate(config, timezone=zone_name)
        fires = plugin.next_fires(config, timezone=zone_name, after=now, count=count)
        description = plugin.describe(config, timezone=zone_name)
    except ConfigError as exc:
        field = exc.field or "trigger_config"
        problem = str(exc.problem).removeprefix(f"{field.split('.')[-1]}: ")  # "cron: cron: …" said once
        return {"error": f"{field}: {problem}"}
    except (ValueError, RecursionError) as exc:  # JSON the parser refused, said as the parser says it
        return {"error": f"trigger_config: not valid JSON ({str(exc)[:200]})"}
    return {"fires": [{"local": f.astimezone(zone), "utc": f} for f in fires], "description": description,
            "time_based": plugin.time_based, "zone": zone_name}


@page("scheduler.view_schedule")
def trigger_preview(request):
    """GET trigger_kind, trigger_config (JSON text), timezone: the next fires, or what is wrong, naming the field."""
    if not request.GET:  # a blank form: nothing to preview yet, and nothing wrong
        return render(request, "scheduler/_trigger_preview.html", {"blank": True})
    answer = trigger_fires(request.GET.get("trigger_kind", ""), request.GET.get("trigger_config", ""),
                           request.GET.get("timezone", "") or "UTC", now=timezone.now())
    # htmx swaps a 200 only: a refusal is still shown where the field is edited; a plain request gets its 400
    status = 400 if "error" in answer and not request.htmx else 200
    return render(request, "scheduler/_trigger_preview.html", answer, status=status)
