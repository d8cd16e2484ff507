"""Incoming webhooks: a signed POST to /hooks/<schedule> starts one run.

Signature: `X-Etl-Signature: sha256=<hex>` where hex is HMAC-SHA256 with the
schedule's secret over f"{timestamp}.".encode() + body, and `X-Etl-Timestamp`
is the sender's unix time in seconds. Signing the timestamp with the body
makes a captured request useless outside the replay window; inside it, the
stored signature (WebhookDelivery, unique per schedule) refuses a replay.
Outgoing alert webhooks are signed the same way (`sign_webhook`).
"""
from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.models import Run, Schedule, TriggerKind, WebhookDelivery, WebhookRefusal
from scheduler.services.common.audit import audit_record
from scheduler.services.common.signing import (  # noqa: F401  sign_webhook is re-exported for senders
    SIGNATURE_HEADER, TIMESTAMP_HEADER, compute_signature, sign_webhook)
from scheduler.services.common.errors import ServiceError, check_storable
from scheduler.services.runs.queue import check_target_params, run_enqueue, validate_params

_SIGNATURE_RE = re.compile(r"^sha256=([0-9a-fA-F]{64})$")
_TIMESTAMP_RE = re.compile(r"^[0-9]{1,12}$")


class WebhookRefused(ServiceError):
    """A refused delivery; `status` is the HTTP status the endpoint answers with.

    `code` names the reason for the refusal counter. `internal` is what only the
    audit log sees: for a schedule that is unknown, not a webhook, disabled or
    without a secret the caller gets exactly the answer a bad signature gets, so
    a stranger cannot learn which schedules exist.
    """

    def __init__(self, message: str, *, status: int, field: str | None = None, code: str = "",
                 internal: str = "") -> None:
        self.status = status
        self.code = code or (field or "request").lower()[:32]
        super().__init__(message, field=field)
        self.internal = internal or str(self)


BAD_SIGNATURE = "signature does not match (check the URL, the secret, and sign timestamp + '.' + body)"


def _unauthorised(code: str, internal: str) -> WebhookRefused:
    return WebhookRefused(BAD_SIGNATURE, status=401, field=SIGNATURE_HEADER, code=code, internal=internal)


@dataclass
class Delivery:
    """One incoming request as the service sees it, independent of Django's HttpRequest."""

    name: str
    body: bytes
    content_type: str
    timestamp: str | None
    signature: str | None
    remote: str = ""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name.lower():
            return value
    return None


def delivery_from_headers(*, name: str, body: bytes, headers: Mapping[str, str], remote: str = "") -> Delivery:
    content_type = (_header(headers, "Content-Type") or "").split(";")[0].strip().lower()
    return Delivery(name=name, body=body, content_type=content_type, timestamp=_header(headers, TIMESTAMP_HEADER),
                    signature=_header(headers, SIGNATURE_HEADER), remote=remote)


def _printable(text: str) -> str:
    # names come from the URL: keep control characters (NUL breaks PostgreSQL text) out of messages and the audit log
    return "".join(c for c in text if c.isprintable())[:100]


def _find(name: str) -> Schedule | None:
    if not name or len(name) > 100 or not name.isprintable():
        return None
    return Schedule.objects.filter(name=name).first()


def _check(delivery: Delivery, *, now: datetime) -> tuple[Schedule, str, dict]:
    """The schedule, the signature hex and the params; WebhookRefused on the first problem."""
    limit = settings.ETL_WEBHOOK_MAX_BYTES
    if len(delivery.body) > limit:
        raise WebhookRefused(f"body is larger than {limit} bytes", status=413, field="body", code="too_large")
    if delivery.content_type != "application/json":
        raise WebhookRefused(f"Content-Type must be application/json, got {delivery.content_type or 'none'!r}"[:200],
                             status=415, field="Content-Type", code="content_type")
    # Everything that does not depend on the schedule first: these answers say nothing about which names exist.
    if not delivery.timestamp:
        raise WebhookRefused(f"missing {TIMESTAMP_HEADER} header (unix seconds)", status=401, field=TIMESTAMP_HEADER,
                             code="timestamp")
    if not _TIMESTAMP_RE.match(delivery.timestamp.strip()):
        raise WebhookRefused(f"{TIMESTAMP_HEADER} must be unix seconds (digits only)", status=401,
                             field=TIMESTAMP_HEADER, code="timestamp")
    timestamp = int(delivery.timestamp.strip())
    window = settings.ETL_WEBHOOK_REPLAY_SECONDS
    skew = now.timestamp() - timestamp
    if abs(skew) > window:
        when = "old" if skew > 0 else "far in the future"
        raise WebhookRefused(f"timestamp is too {when}: more than {window} s from the server's clock", status=401,
                             field=TIMESTAMP_HEADER, code="timestamp")
    if not delivery.signature:
        raise WebhookRefused(f"missing {SIGNATURE_HEADER} header", status=401, field=SIGNATURE_HEADER,
                             code="signature")
    found = _SIGNATURE_RE.match(delivery.signature.strip())
    if not found:
        raise WebhookRefused(f"{SIGNATURE_HEADER} must be 'sha256=' followed by 64 hex digits", status=401,
                             field=SIGNATURE_HEADER, code="signature")
    # An unknown, non-webhook, disabled or secretless schedule answers exactly like a bad signature.
    schedule = _find(delivery.name)
    if schedule is None:
        raise _unauthorised("unknown", "unknown schedule")
    if schedule.trigger_kind != TriggerKind.WEBHOOK:
        raise _unauthorised("not_webhook", f"schedule '{schedule.name}' is not a webhook schedule")
    if not schedule.enabled:
        raise _unauthorised("disabled", f"schedule '{schedule.name}' is disabled")
    if not schedule.webhook_secret:
        raise _unauthorised("no_secret", f"schedule '{schedule.name}' has no webhook secret; rotate one first")
    given = found.group(1).lower()
    expected = compute_signature(schedule.webhook_secret, delivery.body, delivery.timestamp.strip())
    if not hmac.compare_digest(given, expected):
        raise _unauthorised("signature", BAD_SIGNATURE)
    try:
        data = parse_json(delivery.body.decode("utf-8"), field="body") if delivery.body.strip() else {}
    except ConfigError as exc:
        raise WebhookRefused(str(exc), status=400, field=exc.field) from None
    except RecursionError:
        raise WebhookRefused("body is nested too deeply", status=400, field="body") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise WebhookRefused(f"body is not valid JSON ({exc})"[:300], status=400, field="body") from None
    if not isinstance(data, dict):  # `null` is not params either
        raise WebhookRefused(f"body must be a JSON object, got {type(data).__name__}", status=400, field="body")
    try:
        params = check_storable(validate_params(data, field="body"), field="body")
        check_target_params(schedule, params, field="body")
    except ServiceError as exc:
        raise WebhookRefused(str(exc), status=400, field=exc.field or "body") from None
    return schedule, given, params


REFUSAL_WINDOW_SECONDS = 60
REFUSAL_RETENTION_DAYS = 30


def webhook_audit_refusal(delivery: Delivery, exc: WebhookRefused, *, now: datetime) -> WebhookRefusal:
    """Count a refusal; only the first of its kind (target, reason) in a minute writes an audit entry.

    A flood of refused requests, anonymous or not, costs one counter row and one
    audit entry per minute and reason, never a row per request; every name that
    is not a schedule counts under one target. What is recorded is our own text
    and the caller's address, never the secret or the body.
    """
    schedule = _find(delivery.name)
    target = f"schedule:{schedule.pk}" if schedule is not None else "unknown"
    window_start = datetime.fromtimestamp(now.timestamp() // REFUSAL_WINDOW_SECONDS * REFUSAL_WINDOW_SECONDS, tz=UTC)
    key = {"target": target, "code": exc.code, "window_start": window_start}
    seen = {"last_at": now, "last_remote": delivery.remote[:45], "sample": _printable(delivery.name)}
    first = False
    if not WebhookRefusal.objects.filter(**key).update(count=F("count") + 1, **seen):
        try:
            with transaction.atomic():
                WebhookRefusal.objects.create(**key, **seen, count=1, status=exc.status, first_at=now)
                first = True
        except IntegrityError:  # another request of the same kind created it first
            WebhookRefusal.objects.filter(**key).update(count=F("count") + 1, **seen)
    refusal = WebhookRefusal.objects.get(**key)
    if first:
        audit_target: Any = schedule if schedule is not None else ("schedule", "unknown")
        audit_record(actor=f"api:webhook {delivery.remote}".strip(), action="webhook.refused", target=audit_target,
                     after={"status": exc.status, "field": exc.field, "code": exc.code, "bytes": len(delivery.body),
                            "counted_in": refusal.pk},
                     reason=f"{exc.internal} (further refusals of this kind in the minute are counted, not audited)",
                     at=now)
    return refusal


def webhook_receive(delivery: Delivery, *, now: datetime | None = None) -> Run:
    """Check a delivery and start its run; WebhookRefused (audited, no run) otherwise."""
    now = now or timezone.now()
    try:
        with transaction.atomic():
            schedule, signature, params = _check(delivery, now=now)
            try:
                with transaction.atomic():
                    WebhookDelivery.objects.create(schedule=schedule, signature=signature, received_at=now)
            except IntegrityError:
                raise WebhookRefused("this request was already received (replayed signature)", status=409,
                                     field=SIGNATURE_HEADER, code="replay") from None
            run = run_enqueue(
                schedule=schedule,
                trigger_kind=TriggerKind.WEBHOOK,
                trigger_key=f"webhook:{signature}",
                params=params,
                logical_time=now,
                triggered_by=f"webhook {delivery.remote}".strip(),
                now=now,
            )
            if run is None:
                raise WebhookRefused("this request was already received (replayed signature)", status=409,
                                     field=SIGNATURE_HEADER, code="replay")
            audit_record(actor=f"api:webhook {delivery.remote}".strip(), action="run.trigger", target=schedule,
                         after={"run": run.pk, "via": "webhook"}, at=now)
    except WebhookRefused as exc:
        webhook_audit_refusal(delivery, exc, now=now)
        raise
    return run


def webhook_rotate_secret(*, schedule: Schedule, actor: Any, reason: str = "", now: datetime | None = None) -> str:
    """A new secret for a webhook schedule; the old one stops working at once. Returns the secret."""
    if schedule.trigger_kind != TriggerKind.WEBHOOK:
        raise ServiceError(f"'{schedule.name}' is a {schedule.trigger_kind} schedule, not a webhook schedule",
                           field="schedule")
    now = now or timezone.now()
    secret = secrets.token_urlsafe(32)
    with transaction.atomic():
        Schedule.objects.filter(pk=schedule.pk).update(webhook_secret=secret)
        # never the secret itself in the audit log
        audit_record(actor=actor, action="schedule.rotate_secret", target=schedule, reason=reason, at=now)
    schedule.webhook_secret = secret
    return secret


def webhook_prune(*, now: datetime) -> int:
    """Forget signatures that can no longer be replayed; governance calls it."""
    # A timestamp may be up to one window in the future, so a signature stays
    # replayable until two windows after it arrived.
    cutoff = now - timedelta(seconds=2 * settings.ETL_WEBHOOK_REPLAY_SECONDS + 60)
    deleted, _ = WebhookDelivery.objects.filter(received_at__lt=cutoff).delete()
    # the counters are a trace for people; the audit entries of each minute's first refusal stay for good
    WebhookRefusal.objects.filter(last_at__lt=now - timedelta(days=REFUSAL_RETENTION_DAYS)).delete()
    return deleted
