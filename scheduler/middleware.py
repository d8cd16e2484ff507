"""Response headers for pages people sign in to."""
from __future__ import annotations

from django.utils.cache import patch_cache_control


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
