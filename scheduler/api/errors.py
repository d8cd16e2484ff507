"""Every error under /api/v1/ is `application/problem+json` (RFC 9457).

The body has `type`, `title`, `status`, `detail` and, for bad input, `errors`:
a list of `{field, message}`. The handlers below turn each kind of failure into
one; `ApiProblemMiddleware` catches what never reaches the API's handlers (an
unknown route, a method the route does not take, a CSRF refusal) and resets
the audit log's "via" for every request.
"""
from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from ninja.errors import AuthenticationError, HttpError, ValidationError

from scheduler.api.parser import BodyUnreadable, UnsupportedMediaType
from scheduler.core import ConfigError
from scheduler.services.common.audit import audit_via_reset, audit_via_set
from scheduler.services.common.errors import Conflict, NotFound, ServiceError
from scheduler.services.access.teams import PermissionRefused
from scheduler.services.access.tokens import TokenRefused

PREFIX = "/api/v1/"
CONTENT_TYPE = "application/problem+json"
TYPE_BASE = "/docs/api.md#"  # a relative reference: the type names a section of the API's documentation
log = logging.getLogger("scheduler.api")


def problem(status: int, detail: str, *, kind: str | None = None, errors: list[dict] | None = None,
            headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> HttpResponse:
    phrase = HTTPStatus(status).phrase
    body: dict[str, Any] = {
        "type": TYPE_BASE + (kind or phrase.lower().replace(" ", "-").replace("'", "")),
        "title": phrase,
        "status": status,
        "detail": detail,
    }
    if errors:
        body["errors"] = errors
    body.update(extra or {})
    response = HttpResponse(json.dumps(body), status=status, content_type=CONTENT_TYPE)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    for key, value in (headers or {}).items():
        response[key] = value
    return response


def _loc_field(loc: list | tuple) -> str:
    # ninja's locations start with where the value came from (body, query, path); the rest names the field
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie", "form"):
        parts = parts[1:]
    if len(parts) > 1 and parts[0] in ("payload", "data", "filters", "body"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def on_validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = list(exc.errors or [])
    if any(e.get("type") == "json_invalid" for e in errors):
        return problem(400, "the request body is not valid JSON", kind="malformed-body",
                       errors=[{"field": "body", "message": "not valid JSON"}])
    out = [{"field": _loc_field(e.get("loc", ())), "message": str(e.get("msg", "invalid"))} for e in errors]
    text = "; ".join(f"{e['field']}: {e['message']}" for e in out)
    return problem(422, f"invalid input: {text}", kind="invalid-input", errors=out)


def on_service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    if isinstance(exc, TokenRefused):
        return problem(401, exc.problem, kind="unauthorized")
    if isinstance(exc, PermissionRefused):
        return problem(403, str(exc), kind="forbidden")
    errors = [{"field": e.field or "", "message": e.problem} for e in exc.errors]
    if isinstance(exc, NotFound):
        return problem(404, str(exc), kind="not-found", errors=errors)
    if isinstance(exc, Conflict):
        run_ids = getattr(exc, "run_ids", None)  # a schedule's delete refused: its unfinished runs
        return problem(409, str(exc), kind="conflict", errors=errors,
                       extra={"run_ids": run_ids} if run_ids is not None else None)
    return problem(422, str(exc), kind="invalid-input", errors=errors)


def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc, AuthenticationError):
        return problem(401, "authentication required: send Authorization: Bearer <token> (or sign in)",
                       kind="unauthorized")
    if exc.status_code == 403 and "CSRF" in str(exc):
        return problem(403, "CSRF check failed: a signed-in session must send the X-CSRFToken header for "
                            "unsafe methods (a bearer token needs none)", kind="forbidden")
    cause = exc.__cause__  # ninja raises "Cannot parse request body" from what our parser raised
    if isinstance(cause, ConfigError):  # an oversized number, named where it is (e.g. body.params.rows)
        return problem(400, f"the request body cannot be read: {cause}", kind="malformed-body",
                       errors=[{"field": cause.field, "message": cause.problem}])
    if isinstance(cause, UnsupportedMediaType):
        return problem(415, f"{cause}; send the body as JSON with Content-Type: application/json",
                       kind="unsupported-media-type",
                       errors=[{"field": "Content-Type", "message": f"must be application/json, got "
                                                                   f"{cause.media_type or 'none'}"}])
    if isinstance(cause, BodyUnreadable):
        return problem(400, f"the request body cannot be read: {cause}", kind="malformed-body",
                       errors=[{"field": "body", "message": str(cause)}])
    if exc.status_code == 400:  # ninja's "Cannot parse request body"
        return problem(400, f"the request body cannot be read: {exc}", kind="malformed-body",
                       errors=[{"field": "body", "message": str(exc)}])
    return problem(exc.status_code, str(exc))


def on_not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return problem(404, "not found", kind="not-found")


def on_decode_error(request: HttpRequest, exc: ValueError) -> HttpResponse:
    return problem(400, f"the request body cannot be read: {exc}", kind="malformed-body",
                   errors=[{"field": "body", "message": "not valid JSON"}])


def on_unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    """Django's own refusals keep their status (as its handler would answer them); anything else is a 500."""
    if isinstance(exc, Http404):
        return problem(404, f"no API route {request.path}; see /api/v1/docs", kind="not-found")
    if isinstance(exc, PermissionDenied):
        return problem(403, "forbidden", kind="forbidden")
    if isinstance(exc, RequestDataTooBig):
        return problem(413, f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
                       kind="body-too-large", errors=[{"field": "body", "message": "too large"}])
    if isinstance(exc, SuspiciousOperation):
        return problem(400, "the request cannot be read", kind="bad-request")
    log.error("API request %s %s failed", request.method, request.path, exc_info=exc)
    return problem(500, "an unexpected error happened; it was logged", kind="server-error")


def register(api) -> None:
    api.add_exception_handler(Exception, on_unexpected)
    api.add_exception_handler(json.JSONDecodeError, on_decode_error)
    api.add_exception_handler(UnicodeDecodeError, on_decode_error)
    api.add_exception_handler(Http404, on_not_found)
    api.add_exception_handler(HttpError, on_http_error)
    api.add_exception_handler(ValidationError, on_validation)
    api.add_exception_handler(ServiceError, on_service_error)


def route_not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Any path under /api/v1/ that names no route (Django would answer an HTML page)."""
    return problem(404, f"no API route {request.path}; see /api/v1/docs", kind="not-found")


route_not_found.csrf_exempt = True  # a POST to a wrong path is a 404, not a CSRF refusal


class ApiProblemMiddleware:
    """Under /api/v1/: no error leaves as anything but problem+json, and "via" never outlives its request."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(PREFIX):
            return self.get_response(request)
        token = audit_via_set("")
        try:
            response = self.get_response(request)
        finally:
            audit_via_reset(token)
        if response.status_code >= 400 and not response.get("Content-Type", "").startswith(CONTENT_TYPE):
            response = self._convert(request, response)
        return response

    def process_exception(self, request, exc):
        if request.path.startswith(PREFIX):
            return on_unexpected(request, exc)
        return None

    @staticmethod
    def _convert(request, response) -> HttpResponse:
        status = response.status_code
        if status == 405:
            allowed = response.get("Allow", "")
            return problem(405, f"{request.method} is not allowed here; allowed: {allowed or 'none'}",
                           kind="method-not-allowed", headers={"Allow": allowed} if allowed else None)
        if status == 404:
            return problem(404, f"no API route {request.path}; see /api/v1/docs", kind="not-found")
        if status == 403:
            return problem(403, "forbidden (CSRF check failed or the permission is missing)", kind="forbidden")
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "error"
        return problem(status if status in HTTPStatus._value2member_map_ else 500, phrase.lower())
