"""Who calls: a bearer token (`Authorization: Bearer etl_<key_id>_<secret>`) or the signed-in session.

A token acts as its user, with exactly the user's permissions and teams; the
request's audit entries say "via API token <key_id>". The session (for the
interactive docs' "try it out") needs the CSRF header on unsafe methods.
"""
from __future__ import annotations

from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie
from ninja.utils import check_csrf

from django.conf import settings

from scheduler.services.common.audit import audit_via_set
from scheduler.services.access.tokens import token_authenticate


class TokenAuth(HttpBearer):
    openapi_scheme = "bearer"

    def __call__(self, request: HttpRequest):
        header = request.headers.get("Authorization")
        if header is None:
            return None
        scheme, _, raw = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self.authenticate(request, raw.strip())

    def authenticate(self, request: HttpRequest, token: str):
        found = token_authenticate(token)  # TokenRefused -> 401 problem (errors.on_service_error)
        request.api_token = found
        audit_via_set(f"API token {found.key_id}")  # ApiProblemMiddleware resets it after the request
        return found.user


class SessionAuth(APIKeyCookie):
    """The dashboard's own session; CSRF checked for unsafe methods, and only for a signed-in user."""

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest):
        return request.COOKIES.get(self.param_name)

    def authenticate(self, request: HttpRequest, key):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        if check_csrf(request) is not None:
            raise HttpError(403, "CSRF check Failed")
        return user


AUTH = [TokenAuth(), SessionAuth()]
