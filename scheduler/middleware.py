"""Request middleware: the viewer's display time zone, no-store for signed-in pages, compressed HTML."""

from __future__ import annotations

import zoneinfo
from functools import wraps

from django.conf import settings
from django.middleware.gzip import GZipMiddleware
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


def client_ip(request) -> str:
    """The caller's address for login throttling: behind our TLS proxy, the one it appended to X-Forwarded-For."""
    if settings.SECURE_PROXY_SSL_HEADER:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if forwarded:
            return forwarded[-1]
    return request.META.get("REMOTE_ADDR", "")


def never_compressed(view):
    """A view whose answer may show a secret beside text the viewer sent (a new API token and its name): sent
    uncompressed, so its length cannot leak the secret a guess at a time (BREACH)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response.never_compressed = True
        return response

    return wrapped


class CompressHtml(GZipMiddleware):
    """Django's gzip (with its random padding against BREACH) for pages (text/html) only, except for answers marked
    `never_compressed`. The API's JSON goes as it is: it carries secrets (a new token) beside text a caller chose."""

    def process_response(self, request, response):
        if getattr(response, "never_compressed", False):
            return response
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        return super().process_response(request, response)
