"""Webhook and event endpoints: JSON in, JSON out, a clear {"error": ...} on every refusal.

Both are CSRF-exempt because machines call them. The event endpoint also
accepts a logged-in session; requiring `Content-Type: application/json`
keeps that safe, since a cross-site form cannot send that type without a
CORS preflight this site never grants.
"""
from __future__ import annotations

import functools
import json
import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.event_tokens import EventTokenRefused, event_token_authenticate
from scheduler.services.admission.events import event_emit
from scheduler.services.admission.webhooks import (
    WebhookRefused,
    delivery_from_headers,
    webhook_audit_refusal,
    webhook_receive,
)
from scheduler.views.common import bearer_token

log = logging.getLogger(__name__)


def _error(message: str, status: int, field: str | None = None) -> JsonResponse:
    body = {"error": message}
    if field:
        body["field"] = field
    return JsonResponse(body, status=status)


def post_only(view):
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            response = _error(f"method {request.method} is not allowed; use POST", 405)
            response["Allow"] = "POST"
            return response
        return view(request, *args, **kwargs)

    return wrapped


def _remote(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "")[:45]


def _read_body(request: HttpRequest) -> bytes | JsonResponse:
    limit = settings.ETL_WEBHOOK_MAX_BYTES
    if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        # Django reads a WSGI body up to Content-Length only: a chunked body would arrive as empty
        return _error("chunked bodies are not accepted; send a Content-Length", 411, "Content-Length")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return _error("Content-Length is not a number", 400, "Content-Length")
    if declared > limit:
        # refuse before reading: an oversized body never reaches memory
        return _error(f"body is larger than {limit} bytes", 413, "body")
    try:
        return request.body
    except RequestDataTooBig:
        return _error(f"body is larger than {limit} bytes", 413, "body")


@csrf_exempt
@post_only
def webhook(request: HttpRequest, name: str):
    body = _read_body(request)
    if isinstance(body, JsonResponse):
        # audited like every other refusal; an empty body stands in for the unread one
        delivery = delivery_from_headers(name=name, body=b"", headers=request.headers, remote=_remote(request))
        problem = json.loads(body.content)
        webhook_audit_refusal(delivery, WebhookRefused(problem["error"], status=body.status_code,
                                                       field=problem.get("field")), now=timezone.now())
        return body
    delivery = delivery_from_headers(name=name, body=body, headers=request.headers, remote=_remote(request))
    try:
        run = webhook_receive(delivery)
    except WebhookRefused as exc:
        return _error(str(exc), exc.status, exc.field)
    return JsonResponse({"run": run.pk, "status": run.status}, status=202)


def _event_actor(request: HttpRequest):
    """(actor, team, None) when the caller may emit events, else (None, None, error response).

    A team's event token speaks for its team only; an admin-wide token (or one of ETL_EVENT_TOKENS) for every
    team; a logged-in user for the teams they belong to.
    """
    token = bearer_token(request)
    if token is not None:
        if not token:
            return None, None, _error("Authorization must be 'Bearer <token>'", 401, "Authorization")
        try:
            caller = event_token_authenticate(token)
        except EventTokenRefused as exc:
            return None, None, _error(exc.problem, 401, "Authorization")
        return caller.actor, caller.team, None
    user = request.user
    if not user.is_authenticated:
        return None, None, _error("authentication required: send 'Authorization: Bearer <token>' or log in", 401,
                                  "Authorization")
    if not user.has_perm("scheduler.trigger_schedule"):
        return None, None, _error("your account may not trigger schedules (permission scheduler.trigger_schedule)",
                                  403)
    return user, None, None


@csrf_exempt
@post_only
def event(request: HttpRequest, topic: str):
    actor, team, refused = _event_actor(request)
    if refused is not None:
        return refused
    content_type = (request.content_type or "").lower()
    if content_type != "application/json":
        return _error(f"Content-Type must be application/json, got {content_type or 'none'!r}", 415, "Content-Type")
    body = _read_body(request)
    if isinstance(body, JsonResponse):
        return body
    try:
        data = parse_json(body.decode("utf-8"), field="body")
    except ConfigError as exc:
        return _error(str(exc), 400, exc.field)
    except RecursionError:
        return _error("body is nested too deeply", 400, "body")
    except (UnicodeDecodeError, ValueError) as exc:
        return _error(f"body is not valid JSON ({exc})"[:300], 400, "body")
    if not isinstance(data, dict):
        return _error(f"body must be a JSON object, got {type(data).__name__}", 400, "body")
    event_id = None
    payload = data
    # The envelope {"id": ..., "payload": {...}}; any other object is the payload itself.
    if "payload" in data and set(data) <= {"id", "payload"}:
        event_id, payload = data.get("id"), data["payload"]
    who = actor if isinstance(actor, str) else f"user:{actor.get_username()}"
    try:
        stored, runs = event_emit(topic=topic, payload=payload, event_id=event_id, source=f"http {who}"[:150],
                                  actor=actor, team=team)
    except ServiceError as exc:
        return _error(str(exc), 400, exc.field)
    duplicate = getattr(stored, "duplicate", False)
    body = {"event": stored.pk, "event_id": stored.event_id, "runs": [r.pk for r in runs], "duplicate": duplicate}
    # 200 for a repeat: the sender's retry succeeded, nothing new was started
    return JsonResponse(body, status=200 if duplicate else 202)
