"""Who is not signed in, and the answer they get: `signed_in` is the one check every page and action asks first.

A page the browser asks for is sent to the login page (302, `next` the page). A request htmx makes (a live part's
poll, an htmx form) gets 401 with `HX-Redirect` instead: a 302 would be followed inside the XMLHttpRequest and the
login page swapped into the live part (a login form inside a table). htmx acts on `HX-Redirect` before it looks at
the status and loads the login page as a whole page; `next` is the page the user was on (`HX-Current-URL`, kept only
when it is on this site), not the poll's own URL, which answers a fragment.

A failed CSRF check means the page's token went stale: the session ended, or the user signed out or in again in
another tab (a login rotates the token). A user no longer signed in gets the same answer as above; a signed-in one
is told that nothing was done: an htmx request reloads the page (a fresh token) with the message, a form sent by
the browser gets the 403 page saying so. The REST API and /metrics have their own doors and answers (JSON, 401).
"""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.http import HttpResponseRedirect, QueryDict
from django.shortcuts import render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

STALE_FORM = (
    "This page was out of date (you signed out, or in again, in another tab), so nothing was done. "
    "Reload the page and try again."
)
STALE_HTMX = "This page was out of date (you signed in again in another tab), so nothing was done: try again."


def is_htmx(request) -> bool:
    return bool(getattr(request, "htmx", False))


def _on_this_site(request, url: str | None) -> str | None:
    """`url` as a path on this site (scheme and host dropped), or None when it points anywhere else."""
    if not url or not url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return None
    parts = urlsplit(url)
    path = urlunsplit(("", "", parts.path or "/", parts.query, parts.fragment))
    # "//evil.example/x" after the host was dropped: a path with no host of its own, or nothing
    return path if url_has_allowed_host_and_scheme(path, allowed_hosts=set()) else None


def return_to(request) -> str | None:
    """Where the user was, to come back to after signing in: the page htmx was on, else the page asked for; for a
    form sent by the browser, the page it was sent from (the action's URL answers only POST)."""
    if is_htmx(request):
        return _on_this_site(request, request.htmx.current_url)
    if request.method in ("GET", "HEAD"):
        return request.get_full_path()
    return _on_this_site(request, request.headers.get("Referer"))


def login_url(next_url: str | None) -> str:
    url = resolve_url(settings.LOGIN_URL)
    if not next_url:
        return url
    query = QueryDict(mutable=True)
    query[REDIRECT_FIELD_NAME] = next_url
    return f"{url}?{query.urlencode(safe='/')}"  # as Django's redirect_to_login writes it


def signin_answer(request):
    """The answer to a request that needs a signed-in user and has none."""
    if is_htmx(request):
        response = HttpResponseClientRedirect(
            login_url(return_to(request)),
            content=b"Signed out: sign in again.",
            content_type="text/plain; charset=utf-8",
        )
        response.status_code = 401
        return response
    return HttpResponseRedirect(login_url(return_to(request)))


def signed_in(view):
    """Login required: anonymous -> `signin_answer` (login page, or 401 + HX-Redirect for htmx)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return signin_answer(request)
        return view(request, *args, **kwargs)

    return wrapped


def csrf_failure(request, reason: str = ""):
    """CSRF_FAILURE_VIEW: a stale token says so, and the signed-out are sent to sign in (Django logs the refusal)."""
    if not request.user.is_authenticated and is_htmx(request):
        return signin_answer(request)
    if is_htmx(request):
        messages.warning(request, STALE_HTMX)
        response = HttpResponseClientRefresh()
        response.status_code = 403
        return response
    return render(request, "403.html", {"exception": STALE_FORM}, status=403)
