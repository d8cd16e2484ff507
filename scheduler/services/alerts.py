"""Alerts to operators: a run that fails for good, a breaker that opens, a
dependency timeout, a governance loop that is late.

Each incident is one Alert row (its `incident_key` is unique), so a problem
that lasts many ticks alerts once. Channels are the schedule's own
(`alert_emails`, `alert_webhook_url`) plus its owning team's (signed with the
team's secret); the global ones from settings (ETL_ALERT_EMAILS,
ETL_ALERT_WEBHOOK_URL signed with ETL_ALERT_WEBHOOK_SECRET) are the fallback
when the team has none, and receive the alerts that concern no schedule.

Delivery never runs on the caller's thread: a slow mail server or webhook
receiver must not hold up a worker or the dispatcher. It runs in a daemon
thread after commit (ETL_ALERTS_SYNC=True delivers inline, for tests). An
alert whose thread died with its process stays PENDING and the governance
loop sends it again.
"""
from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.dispatch import receiver
from django.utils import timezone

from scheduler import signals
from scheduler.models import Alert, AlertKind, AlertStatus, LoopLease, Run, Schedule
from scheduler.selectors import governance_health
from scheduler.services.teams import team_alert_channels, team_webhook_secret
from scheduler.services.webhooks import sign_webhook

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT = 5.0
WEBHOOK_ATTEMPTS = 3
WEBHOOK_BACKOFF = 0.5  # seconds before the 2nd attempt, doubling after
RESEND_AFTER = timedelta(minutes=2)
MAX_DELIVERIES = 5
WATCHDOG_EVERY = timedelta(seconds=60)


# --- recipients -------------------------------------------------------------

def _emails(text_or_list: Any) -> list[str]:
    items = text_or_list.split(",") if isinstance(text_or_list, str) else list(text_or_list or [])
    return [a.strip() for a in items if a and a.strip()]


def channels_for(schedule: Schedule | None) -> list[dict]:
    """Where an alert about `schedule` goes, no duplicates: its own channels, its owning team's, and the
    global ones (settings) as the fallback when the team has none."""
    team = team_alert_channels(schedule)
    emails = _emails(schedule.alert_emails if schedule is not None else "")
    emails += [a for c in team if c["type"] == "email" for a in c["to"]]
    urls: dict[str, dict] = {}
    if schedule is not None and schedule.alert_webhook_url:
        urls[schedule.alert_webhook_url] = {"type": "webhook", "url": schedule.alert_webhook_url}
    for channel in team:
        if channel["type"] == "webhook":
            urls.setdefault(channel["url"], channel)
    if not team:
        emails += _emails(settings.ETL_ALERT_EMAILS)
        if settings.ETL_ALERT_WEBHOOK_URL:
            urls.setdefault(settings.ETL_ALERT_WEBHOOK_URL, {"type": "webhook", "url": settings.ETL_ALERT_WEBHOOK_URL})
    out: list[dict] = []
    seen_emails = list(dict.fromkeys(emails))
    if seen_emails:
        out.append({"type": "email", "to": seen_emails})
    out.extend(urls.values())
    return out


# --- recording --------------------------------------------------------------

def alert_raise(*, kind: str, incident_key: str, message: str, schedule: Schedule | None = None,
                run: Run | None = None, now: datetime | None = None) -> Alert | None:
    """Record an alert and send it after commit; None when this incident was already alerted."""
    now = now or timezone.now()
    try:
        with transaction.atomic():
            alert = Alert.objects.create(
                kind=kind, incident_key=incident_key[:200], schedule=schedule, run=run, message=message,
                channels=channels_for(schedule), created_at=now,
            )
    except IntegrityError:
        return None  # one alert per incident
    if not alert.channels:
        # recorded for the pages; nowhere to send it
        Alert.objects.filter(pk=alert.pk).update(status=AlertStatus.SENT, sent_at=now)
        alert.status = AlertStatus.SENT
        return alert
    transaction.on_commit(lambda: _schedule_delivery(alert.pk))
    return alert


def _schedule_delivery(alert_id: int) -> None:
    if getattr(settings, "ETL_ALERTS_SYNC", False):
        alert_deliver(alert_id)
        return
    threading.Thread(target=_deliver_in_thread, args=(alert_id,), name=f"alert-{alert_id}", daemon=True).start()


def _deliver_in_thread(alert_id: int) -> None:
    try:
        alert_deliver(alert_id)
    except Exception:
        log.exception("alert %s could not be delivered", alert_id)
    finally:
        connection.close()


# --- delivery ---------------------------------------------------------------

def _payload(alert: Alert) -> dict:
    return {
        "alert": alert.pk, "kind": alert.kind, "incident": alert.incident_key, "message": alert.message,
        "schedule": alert.schedule.name if alert.schedule_id and alert.schedule else None,
        "run": alert.run_id, "created_at": alert.created_at.isoformat(),
    }


def post_json(url: str, payload: dict, *, secret: str = "", attempts: int = WEBHOOK_ATTEMPTS,
              timeout: float = WEBHOOK_TIMEOUT, backoff: float | None = None, sleep=time.sleep) -> None:
    """POST signed JSON with retries; raises the last error when every attempt failed."""
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"alert webhook URL must be http(s), got {url!r}")
    body = json.dumps(payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "etl-scheduler-alerts"}
    backoff = WEBHOOK_BACKOFF if backoff is None else backoff
    last: Exception | None = None
    for attempt in range(attempts):
        if attempt:
            sleep(backoff * 2 ** (attempt - 1))
        if secret:
            # re-signed per attempt: each carries a fresh timestamp for the receiver's replay window
            headers.update(sign_webhook(secret, body))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                if 200 <= response.status < 300:
                    return
                last = RuntimeError(f"HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            last = RuntimeError(f"HTTP {exc.code}")
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                break  # the receiver refuses this alert; retrying will not change its mind
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            last = exc
    raise RuntimeError(f"{url}: {last}")


def alert_deliver(alert_id: int, *, sleep=time.sleep) -> str:
    """Send one alert through its channels; returns the new status."""
    close_old_connections()
    alert = Alert.objects.select_related("schedule").filter(pk=alert_id).first()
    if alert is None or alert.status == AlertStatus.SENT:
        return alert.status if alert else "missing"
    Alert.objects.filter(pk=alert.pk).update(attempts=alert.attempts + 1)
    subject = f"[etl] {alert.get_kind_display()}: {alert.message.splitlines()[0][:120]}"
    errors: list[str] = []
    for channel in alert.channels:
        try:
            if channel.get("type") == "email":
                send_mail(subject, alert.message, settings.DEFAULT_FROM_EMAIL, channel["to"], fail_silently=False)
            elif channel.get("type") == "webhook":
                secret = team_webhook_secret(channel) or settings.ETL_ALERT_WEBHOOK_SECRET
                post_json(channel["url"], _payload(alert), secret=secret, sleep=sleep)
        except Exception as exc:  # each channel on its own: a dead webhook must not stop the e-mail  # noqa: BLE001
            errors.append(f"{channel.get('type')}: {exc}"[:500])
    status = AlertStatus.FAILED if errors else AlertStatus.SENT
    Alert.objects.filter(pk=alert.pk).update(status=status, error="\n".join(errors),
                                             sent_at=None if errors else timezone.now())
    return status


# --- receivers: the incidents -----------------------------------------------

@receiver(signals.run_failed, dispatch_uid="alerts.run_failed")
def on_run_failed(sender, run: Run, final: bool = True, **kwargs) -> None:
    if not final:
        return
    try:
        schedule = run.schedule
        if run.reason.startswith("dependency timeout"):
            alert_raise(kind=AlertKind.DEPENDENCY_TIMEOUT, incident_key=f"dependency_timeout:{run.pk}",
                        message=f"Run {run.pk} of '{schedule.name}' failed: {run.reason}", schedule=schedule, run=run)
            return
        alert_raise(
            kind=AlertKind.RUN_FAILED, incident_key=f"run_failed:{run.pk}",
            message=(f"Run {run.pk} of '{schedule.name}' ({schedule.target_id}) failed for good after attempt "
                     f"{run.attempt}/{run.max_attempts}: {run.reason or 'no reason recorded'}"),
            schedule=schedule, run=run,
        )
    except Exception:  # an alert problem must never break the run's own path
        log.exception("could not raise the alert for run %s", getattr(run, "pk", None))


@receiver(signals.circuit_breaker_changed, dispatch_uid="alerts.breaker")
def on_breaker_changed(sender, schedule: Schedule, old: str, new: str, reason: str = "", **kwargs) -> None:
    if new != "open":
        return
    try:
        opened = schedule.breaker_opened_at.isoformat() if schedule.breaker_opened_at else "unknown"
        alert_raise(
            kind=AlertKind.BREAKER_OPENED, incident_key=f"breaker_opened:{schedule.pk}:{opened}",
            message=(f"Circuit breaker of '{schedule.name}' opened ({reason}); runs are blocked for "
                     f"{schedule.breaker_current_cooldown_seconds or schedule.breaker_cooldown_seconds} s"),
            schedule=schedule,
        )
    except Exception:
        log.exception("could not raise the breaker alert for schedule %s", getattr(schedule, "pk", None))


# --- the governance loop's health ---------------------------------------------

def governance_late_alert(*, now: datetime) -> Alert | None:
    """Alert once per outage when the governance loop is late.

    The loop cannot report its own death, so the dispatch loop asks. The
    incident is the last tick seen: one alert however long the loop stays down.
    Before any tick exists, it counts as late only once the dispatch loop has
    held its lease for a few governance intervals (a fresh install is not an
    incident).
    """
    health = governance_health(now)
    if not health["late"]:
        return None
    interval = settings.ETL_GOVERNANCE_INTERVAL
    if health["last_tick"] is None:
        lease = LoopLease.objects.filter(name="dispatch").only("acquired_at", "holder").first()
        grace = timedelta(seconds=3 * interval + settings.ETL_LEASE_SECONDS)
        if lease is None or not lease.holder or lease.acquired_at is None or now - lease.acquired_at < grace:
            return None
        key, since = "governance_late:never", "it has never run"
    else:
        key = f"governance_late:{health['last_tick'].isoformat()}"
        since = f"last tick {int(health['age_seconds'])} s ago at {health['last_tick']:%Y-%m-%d %H:%M:%S} UTC"
    return alert_raise(
        kind=AlertKind.GOVERNANCE_LATE, incident_key=key,
        message=(f"The governance loop is late ({since}; expected every {interval:g} s). Stuck runs, dependency "
                 "timeouts and breaker cooldowns are not handled until a cluster runs it again."),
        now=now,
    )


_last_watchdog: datetime | None = None


def governance_watchdog(*, now: datetime) -> None:
    """Called from every dispatch tick; checks at most once a minute and never raises."""
    global _last_watchdog
    if _last_watchdog is not None and _last_watchdog <= now < _last_watchdog + WATCHDOG_EVERY:
        return
    _last_watchdog = now
    try:
        governance_late_alert(now=now)
    except Exception:
        log.exception("governance watchdog failed")


def governance_alerts(*, now: datetime) -> list[int]:
    """Governance: send again the alerts whose delivery died with its process or failed."""
    candidates = Alert.objects.filter(
        status__in=[AlertStatus.PENDING, AlertStatus.FAILED], created_at__lt=now - RESEND_AFTER,
        attempts__lt=MAX_DELIVERIES,
    ).values_list("id", "created_at", "attempts")[:100]
    # back off: the n-th resend waits RESEND_AFTER * 2**n after the alert was raised
    stale = [aid for aid, created, attempts in candidates if created + RESEND_AFTER * 2 ** attempts <= now][:20]
    for alert_id in stale:
        transaction.on_commit(lambda aid=alert_id: _schedule_delivery(aid))
    return stale
