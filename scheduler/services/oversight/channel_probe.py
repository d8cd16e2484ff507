"""The "send a test notification" button: one channel of a team or a schedule, through the real path.

The test goes through exactly what an alert goes through (channels.send_channel: the SSRF guard after
name resolution, then Apprise, or Django's mail for a plain mailto://), is allowed to whoever may change
the team or the schedule, and is audited with the channel masked and the outcome.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from scheduler.models import Schedule, Team
from scheduler.services.common.audit import audit_record
from scheduler.services.integrations.channels import mask_text, mask_url, send_channel, split_channels
from scheduler.services.common.errors import NotFound, ServiceError
from scheduler.services.access.teams import authorize, resolve_user

TEST_TITLE = "[etl] Test notification"


def _actor_name(actor: Any) -> str:
    user = resolve_user(actor)
    return user.get_username() if user is not None else str(actor)


def channel_test_send(*, target: Team | Schedule, index: int, actor: Any, now: datetime | None = None) -> dict:
    """Send a test notification to channel `index` (0-based) of `target`; returns {channel, ok, error}.

    A refused permission or an unknown channel raises; a failed send is an answer (ok False, the error
    masked), audited like a success.
    """
    now = now or timezone.now()
    if isinstance(target, Team):
        authorize(actor=actor, perm="scheduler.change_team")
        secret, kind = target.alert_webhook_secret, "team"
    elif isinstance(target, Schedule):
        authorize(actor=actor, perm="scheduler.change_schedule", obj=target)
        secret, kind = settings.ETL_ALERT_WEBHOOK_SECRET, "schedule"
    else:
        raise ServiceError(f"a test notification goes to a team's or a schedule's channel, not a "
                           f"{type(target).__name__}", field="target")
    urls = split_channels(target.alert_channels, field="alert_channels")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(urls):
        raise NotFound(f"{kind} '{target.name}' has no channel {index!r} (it has {len(urls)})", field="channel")
    url = urls[index]
    body = (f"A test notification from the ETL scheduler for {kind} '{target.name}', sent by "
            f"{_actor_name(actor)} at {now:%Y-%m-%d %H:%M:%S} UTC. Alerts for it will arrive here.")
    payload = {"alert": None, "kind": "test", "incident": None, "message": body,
               "schedule": target.name if kind == "schedule" else None, "team": target.name if kind == "team" else None,
               "run": None, "created_at": now.isoformat()}
    try:
        send_channel(url, title=TEST_TITLE, body=body, payload=payload, secret=secret or "", field="alert_channels")
        ok, error = True, ""
    except Exception as exc:  # the answer the operator reads, never a 500  # noqa: BLE001
        ok, error = False, mask_text(getattr(exc, "problem", None) or str(exc), [url])[:500]
    shown = mask_url(url)
    audit_record(actor=actor, action=f"{kind}.test_channel", target=target,
                 after={"channel": shown, "index": index, "ok": ok, **({"error": error} if error else {})}, at=now)
    return {"channel": shown, "index": index, "ok": ok, "error": error}
