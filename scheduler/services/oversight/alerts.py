"""Alerts to operators: a run that fails for good, a breaker that opens, a
dependency timeout, a governance loop that is late.

Each incident is one Alert row (its `incident_key` is unique), so a problem
that lasts many ticks alerts once. Channels are Apprise URLs
(services/channels.py, docs/notifications.md): the schedule's own
`alert_channels` plus its owning team's (an etlhook(s):// one signed with the
team's secret); the global ones from settings (ETL_ALERT_URLS, and the older
ETL_ALERT_EMAILS / ETL_ALERT_WEBHOOK_URL mapped onto mailto:// and signed
etlhook(s):// URLs) are the fallback when the team has none, and receive the
alerts that concern no schedule.

Delivery never runs on the caller's thread: a slow mail server or webhook
receiver must not hold up a worker or the dispatcher. The Alert rows are a
durable queue, as healthchecks' Flip rows are: raising an alert only writes
its row. In every cluster an `alerts` loop (one at a time, by lease) claims
due rows with a compare-and-set (PENDING or due FAILED -> SENDING) and hands
them to a bounded pool of ETL_ALERT_WORKERS threads; it claims no more rows
than the pool has free threads, so an alert storm queues in the table, never
in memory, and a process exit loses nothing: a row left SENDING by a dead
process is released by governance and claimed again. Failed deliveries are
retried with a doubling delay, up to MAX_DELIVERIES attempts.
(ETL_ALERTS_SYNC=True delivers inline, for tests.)
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.dispatch import receiver
from django.utils import timezone

from scheduler import signals
from scheduler.models import Alert, AlertKind, AlertStatus, LoopLease, Run, Schedule
from scheduler.selectors import governance_health
from scheduler.services.integrations.channels import (
    check_channels,
    instantiate,
    mail_parties,
    mask_text,
    mask_url,
    send_channel,
    send_django_mail,
    split_channels,
    uses_django_mail,
)
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import team_alert_channels, team_webhook_secret

log = logging.getLogger(__name__)

RESEND_AFTER = timedelta(minutes=2)
MAX_DELIVERIES = 5
# a delivery takes at most channels.WEBHOOK_ATTEMPTS of Apprise's timeouts plus its waits per channel; a claim older
# than this died
CLAIM_TIMEOUT = timedelta(minutes=5)
WATCHDOG_EVERY = timedelta(seconds=60)


# --- recipients -------------------------------------------------------------

def global_channel_urls() -> list[dict]:
    """The global channels: ETL_ALERT_URLS, plus the old settings mapped onto Apprise URLs.

    ETL_ALERT_EMAILS a@x.com -> mailto://a@x.com (sent through Django's EMAIL_BACKEND);
    ETL_ALERT_WEBHOOK_URL https://h/p -> etlhooks://h/p (signed with ETL_ALERT_WEBHOOK_SECRET).
    """
    urls = split_channels(list(getattr(settings, "ETL_ALERT_URLS", []) or []), field="ETL_ALERT_URLS")
    urls += [f"mailto://{address}" for address in _emails(settings.ETL_ALERT_EMAILS)]
    if settings.ETL_ALERT_WEBHOOK_URL:
        urls.append(webhook_to_channel(settings.ETL_ALERT_WEBHOOK_URL, field="ETL_ALERT_WEBHOOK_URL"))
    return [{"url": url, "source": "global"} for url in urls]


@register(Tags.compatibility)
def check_global_channels(app_configs=None, **kwargs) -> list[CheckMessage]:
    """A system check (manage.py check, every start): the global channels must be URLs Apprise can use."""
    try:
        check_channels([c["url"] for c in global_channel_urls()], field="ETL_ALERT_URLS")
    except ServiceError as exc:
        return [Error(str(exc), hint="see docs/notifications.md", id="scheduler.E017")]
    return []


def _emails(text_or_list: Any) -> list[str]:
    items = text_or_list.split(",") if isinstance(text_or_list, str) else list(text_or_list or [])
    return [a.strip() for a in items if a and a.strip()]


def webhook_to_channel(url: str, *, field: str = "webhook_url", strict: bool = True) -> str:
    """An old http(s) alert webhook as the signed Apprise channel that sends the same body and headers."""
    scheme, _, rest = url.strip().partition("://")
    if strict and scheme.lower() not in ("http", "https"):
        raise ServiceError(f"must be an http:// or https:// URL, got {url[:100]!r}", field=field)
    return f"{'etlhooks' if scheme.lower() == 'https' else 'etlhook'}://{rest}"


def channels_for(schedule: Schedule | None) -> list[dict]:
    """Where an alert about `schedule` goes, no duplicates: its own channels, its owning team's, and the
    global ones (settings) as the fallback when the team has none."""
    team = team_alert_channels(schedule)
    found: dict[str, dict] = {}
    if schedule is not None:
        for url in split_channels(schedule.alert_channels, field="alert_channels"):
            found.setdefault(url, {"url": url, "source": "schedule"})
    for channel in team:
        found.setdefault(channel["url"], channel)
    if not team:
        for channel in global_channel_urls():
            found.setdefault(channel["url"], channel)
    return list(found.values())


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
    if getattr(settings, "ETL_ALERTS_SYNC", False):
        transaction.on_commit(lambda: alert_deliver(alert.pk))
    # otherwise the row is the queue: a cluster's alerts loop claims it within ETL_ALERT_INTERVAL
    return alert


# --- the durable queue: claim, and a bounded pool of senders --------------------

def alerts_claim(*, now: datetime, limit: int) -> list[int]:
    """Claim up to `limit` due alerts (compare-and-set to SENDING); returns the ids this caller now owns."""
    if limit <= 0:
        return []
    due = (Alert.objects.filter(status=AlertStatus.PENDING)
           | Alert.objects.filter(status=AlertStatus.FAILED, next_attempt_at__lte=now, attempts__lt=MAX_DELIVERIES))
    claimed: list[int] = []
    for alert_id, status in due.order_by("created_at", "id").values_list("id", "status")[: limit * 2]:
        if len(claimed) >= limit:
            break
        if Alert.objects.filter(pk=alert_id, status=status).update(status=AlertStatus.SENDING, claimed_at=now):
            claimed.append(alert_id)
    return claimed


class AlertSender:
    """A fixed pool of threads fed from the Alert table, never holding more work than it has threads."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="etl-alert")
        self.in_flight = 0
        self.lock = threading.Lock()

    def pump(self, *, now: datetime) -> list[int]:
        with self.lock:
            free = self.workers - self.in_flight
        claimed = alerts_claim(now=now, limit=free)
        for alert_id in claimed:
            with self.lock:
                self.in_flight += 1
            self.pool.submit(self._send, alert_id)
        return claimed

    def _send(self, alert_id: int) -> None:
        try:
            alert_deliver(alert_id)
        except Exception:
            log.exception("alert %s could not be delivered", alert_id)
        finally:
            connection.close()
            with self.lock:
                self.in_flight -= 1

    def shutdown(self, timeout: float | None = None) -> None:
        """Let the deliveries in flight finish; what is not finished stays SENDING and is claimed again later."""
        self.pool.shutdown(wait=timeout is None or timeout > 0, cancel_futures=True)


_sender: AlertSender | None = None


def alerts_tick(*, now: datetime, holder: str = "") -> list[int]:
    """The alerts loop's tick: hand due alerts to this process's bounded sender."""
    global _sender
    if _sender is None:
        _sender = AlertSender(settings.ETL_ALERT_WORKERS)
    return _sender.pump(now=now)


def alerts_shutdown() -> None:
    global _sender
    if _sender is not None:
        _sender.shutdown()
        _sender = None


# --- delivery ---------------------------------------------------------------

def _payload(alert: Alert) -> dict:
    return {
        "alert": alert.pk, "kind": alert.kind, "incident": alert.incident_key, "message": alert.message,
        "schedule": alert.schedule.name if alert.schedule_id and alert.schedule else None,
        "run": alert.run_id, "created_at": alert.created_at.isoformat(),
    }


def _current(channel: dict) -> list[dict]:
    """A stored channel as Apprise URL channels (rows queued before 0017 hold {"type": "email"/"webhook"})."""
    if "url" in channel and "type" not in channel:
        return [channel]
    source = {"source": "team", "team": channel["team"]} if channel.get("team") else {"source": "global"}
    if channel.get("type") == "email":
        return [{"url": f"mailto://{address}", **source} for address in channel.get("to", [])]
    return [{"url": webhook_to_channel(channel.get("url", ""), strict=False), **source}]


def channel_secret(channel: dict) -> str:
    """What signs an etlhook(s):// channel: its team's secret, else ETL_ALERT_WEBHOOK_SECRET (may be empty)."""
    return team_webhook_secret(channel) or settings.ETL_ALERT_WEBHOOK_SECRET


def alert_deliver(alert_id: int, *, now: datetime | None = None) -> str:
    """Send one alert through its channels; returns the new status."""
    close_old_connections()
    alert = Alert.objects.select_related("schedule").filter(pk=alert_id).first()
    if alert is None or alert.status == AlertStatus.SENT:
        return alert.status if alert else "missing"
    attempts = alert.attempts + 1
    Alert.objects.filter(pk=alert.pk).update(attempts=attempts)
    subject = f"[etl] {alert.get_kind_display()}: {alert.message.splitlines()[0][:120]}"
    errors: list[str] = []
    channels = [c for stored in alert.channels for c in _current(stored)]
    # every e-mail that goes through Django is one message to all its recipients (to, cc and bcc)
    parties = [mail_parties(instantiate(c["url"])) for c in channels if uses_django_mail(c["url"])]
    if parties:
        try:
            send_django_mail(subject=subject, body=alert.message, parties=parties)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"e-mail: {exc}"[:500])
    for channel in channels:
        if uses_django_mail(channel["url"]):
            continue
        try:
            send_channel(channel["url"], title=subject, body=alert.message, payload=_payload(alert),
                         secret=channel_secret(channel), field="alert_channels")
        except Exception as exc:  # each channel on its own: a dead webhook must not stop the e-mail  # noqa: BLE001
            errors.append(mask_text(f"{mask_url(channel['url'])}: {exc}", [channel["url"]])[:500])
    status = AlertStatus.FAILED if errors else AlertStatus.SENT
    now = now or timezone.now()
    # the n-th failed attempt waits RESEND_AFTER * 2**(n-1) before the next; after MAX_DELIVERIES it stays FAILED
    retry_at = now + RESEND_AFTER * 2 ** (attempts - 1) if errors and attempts < MAX_DELIVERIES else None
    Alert.objects.filter(pk=alert.pk).update(status=status, error="\n".join(errors), next_attempt_at=retry_at,
                                             sent_at=None if errors else now)
    if errors:
        log.warning("alert %s not delivered everywhere: %s", alert.pk, "; ".join(errors))
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
    """Governance: release alerts whose sender died mid-delivery (SENDING for too long), to be claimed again."""
    stale = list(Alert.objects.filter(status=AlertStatus.SENDING, claimed_at__lt=now - CLAIM_TIMEOUT)
                 .values_list("id", flat=True)[:100])
    released = [aid for aid in stale
                if Alert.objects.filter(pk=aid, status=AlertStatus.SENDING, claimed_at__lt=now - CLAIM_TIMEOUT)
                .update(status=AlertStatus.FAILED, next_attempt_at=now)]
    return released
