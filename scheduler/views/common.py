"""Small helpers shared by the page views."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.views.decorators.http import require_POST, require_safe


def can(perm: str):
    """Login required (anonymous -> login page), then the permission (missing -> 403)."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.has_perm(perm):
                raise PermissionDenied(f"needs permission {perm}")
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorator


def page(perm: str):
    """A read-only page: GET or HEAD only, login, then the permission."""

    def decorator(view):
        return require_safe(can(perm)(view))

    return decorator


def action(perm: str):
    """A POST-only state change: login, permission, CSRF (by the middleware)."""

    def decorator(view):
        return require_POST(can(perm)(view))

    return decorator


def int_or_none(value) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def partial(request, template: str, name: str) -> str:
    """The named partial for htmx requests, the whole page otherwise."""
    return f"{template}#{name}" if request.htmx else template


def bearer_token(request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive (RFC 7235).

    None when there is no Authorization header; "" when it is there but not a bearer token.
    """
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""
