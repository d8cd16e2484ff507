"""Request middleware: the viewer's display time zone, and no-store for signed-in pages."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.utils import timezone
from django.utils.cache import patch_cache_control

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


class NoStoreForSignedInUsers:
    """`Cache-Control: no-store, private` on every response to a signed-in user.

    Pages show runs, audit entries and schedules; a shared proxy or the
    browser's back-forward cache must not keep them after sign-out.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated and not response.has_header("Cache-Control"):
            patch_cache_control(response, no_store=True, private=True)
        return response
