"""The viewer's own preferences: the time zone their pages show times in."""

from __future__ import annotations

import zoneinfo

from django import forms
from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from scheduler.middleware import SESSION_KEY, display_zone_name
from scheduler.views.signin import signed_in


def _zone_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(zoneinfo.available_timezones())]


class TimezoneForm(forms.Form):
    timezone = forms.ChoiceField(
        label="Display time zone",
        choices=_zone_choices,
        error_messages={"invalid_choice": "%(value)s is not a known IANA time zone (such as Europe/Berlin)."},
    )


def _safe_next(request) -> str | None:
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return None


@signed_in
@require_http_methods(["GET", "HEAD", "POST"])
def preferences(request):
    """GET shows the form; POST stores the zone in the session (only this viewer's pages change)."""
    if request.method == "POST":
        if request.POST.get("reset"):
            request.session.pop(SESSION_KEY, None)
            messages.success(request, f"Times are shown in the server's zone, {settings.TIME_ZONE}.")
            return redirect(_safe_next(request) or "scheduler:preferences")
        form = TimezoneForm(request.POST)
        if form.is_valid():
            request.session[SESSION_KEY] = form.cleaned_data["timezone"]
            messages.success(request, f"Times are now shown in {form.cleaned_data['timezone']}.")
            return redirect(_safe_next(request) or "scheduler:preferences")
        status = 400
    else:
        form = TimezoneForm(initial={"timezone": display_zone_name(request)})
        status = 200
    context = {"form": form, "server_zone": settings.TIME_ZONE, "next": _safe_next(request) or ""}
    return render(request, "scheduler/preferences.html", context, status=status)
