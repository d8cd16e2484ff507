"""Each viewer sees times in the zone they picked (kept in their session), else in TIME_ZONE."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.utils import timezone

SESSION_KEY = "display_timezone"


def display_zone_name(request) -> str:
    name = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    return name if name and is_zone(name) else settings.TIME_ZONE


def is_zone(name: str) -> bool:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


class DisplayTimezoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        timezone.activate(zoneinfo.ZoneInfo(display_zone_name(request)))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
