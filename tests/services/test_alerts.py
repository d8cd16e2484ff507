"""Alerts: one per incident, by e-mail (locmem) and a signed JSON webhook (a local server), with retries.

Channels are Apprise URLs (scheduler.services.integrations.channels): mailto:// goes through Django's mail, etlhook(s)://
is the signed webhook; the fixtures here use the old settings, which map onto those URLs.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from unittest import mock

import pytest
from django.core import mail

from scheduler.models import Alert, AlertKind, AlertStatus, GovernanceTick, LoopLease, Run, RunStatus
from scheduler.services.oversight import alerts
from scheduler.services.integrations import channels
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sync_alerts(settings, monkeypatch):
    settings.ETL_ALERTS_SYNC = True
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True  # the receivers here listen on 127.0.0.1
    settings.ETL_ALERT_EMAILS = []
    settings.ETL_ALERT_WEBHOOK_URL = ""
    settings.ETL_ALERT_WEBHOOK_SECRET = ""
    settings.ETL_ALERT_URLS = []
    monkeypatch.setattr(channels, "WEBHOOK_WAIT", 0.0)
    monkeypatch.setattr(alerts, "_last_watchdog", None)


class Receiver:
    """A local HTTP server on 127.0.0.1 that records JSON posts and answers with scripted statuses."""

    def __init__(self, statuses=()):
        self.requests: list[dict] = []
        self.statuses = list(statuses)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append({"headers": dict(self.headers), "body": body})
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    servers = []

    def make(statuses=()):
        server = Receiver(statuses)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


def _run_inline(now):
    sent = []
    with mock.patch(
        "scheduler.services.admission.dispatch.enqueue_execution", side_effect=lambda rid, tok: sent.append((rid, tok))
    ):
        dispatch_tick(now=now, holder="test")
    for run_id, token in sent:
        execute_run(run_id, token, clock=lambda: now)


def _fail_once(schedule, now):
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"fail": True}, now=now)
    _run_inline(now)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    return run


def test_a_run_that_fails_for_good_mails_the_schedule_and_global_addresses_once(make_schedule, now, settings):
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1,
                             alert_channels="mailto://owner@example.com\nmailto://ops@example.com")
    run = _fail_once(schedule, now)
    alert = Alert.objects.get(kind=AlertKind.RUN_FAILED)
    assert alert.incident_key == f"run_failed:{run.pk}" and alert.run_id == run.pk
    assert alert.status == AlertStatus.SENT and alert.attempts == 1
    assert len(mail.outbox) == 1
    assert mail.outbox[0].to == ["owner@example.com", "ops@example.com"]
    assert "flaky" in mail.outbox[0].subject and str(run.pk) in mail.outbox[0].body
    # the same incident reported again (a second signal) is not a second alert
    alerts.on_run_failed(sender=Run, run=run, final=True)
    assert Alert.objects.count() == 1 and len(mail.outbox) == 1


def test_a_requeued_failure_is_not_an_alert(make_schedule):
    schedule = make_schedule("noop")
    run = run_trigger_manual(schedule=schedule, actor="tests")
    alerts.on_run_failed(sender=Run, run=run, final=False)
    assert not Alert.objects.exists()


def test_a_signed_webhook_alert_reaches_a_local_receiver(make_schedule, now, settings, receiver):
    server = receiver()
    settings.ETL_ALERT_WEBHOOK_SECRET = "alert-secret"
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1,
                             alert_channels=[alerts.webhook_to_channel(server.url)])
    run = _fail_once(schedule, now)
    (request,) = server.requests
    payload = json.loads(request["body"])
    assert payload["kind"] == "run_failed" and payload["run"] == run.pk and payload["schedule"] == "flaky"
    ts = request["headers"]["X-Etl-Timestamp"]
    expected = hmac.new(b"alert-secret", f"{ts}.".encode() + request["body"], hashlib.sha256).hexdigest()
    assert request["headers"]["X-Etl-Signature"] == f"sha256={expected}"
    assert Alert.objects.get().status == AlertStatus.SENT


def test_a_webhook_alert_is_retried_after_server_errors(make_schedule, now, settings, receiver):
    server = receiver(statuses=[500, 503])
    settings.ETL_ALERT_WEBHOOK_URL = server.url
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1)
    _fail_once(schedule, now)
    assert len(server.requests) == 3
    assert Alert.objects.get().status == AlertStatus.SENT


def test_a_webhook_that_keeps_failing_marks_the_alert_failed_but_the_email_still_goes(make_schedule, now, settings,
                                                                                       receiver):
    server = receiver(statuses=[500, 500, 500, 500])
    settings.ETL_ALERT_WEBHOOK_URL = server.url
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1)
    _fail_once(schedule, now)
    alert = Alert.objects.get()
    assert alert.status == AlertStatus.FAILED and "HTTP 500" in alert.error
    assert len(server.requests) == channels.WEBHOOK_ATTEMPTS and len(mail.outbox) == 1


def test_a_signed_webhook_that_refuses_fails_the_delivery_within_its_attempts(receiver):
    server = receiver(statuses=[400, 400, 400])
    with pytest.raises(RuntimeError, match="HTTP 400"):
        channels.send_channel(alerts.webhook_to_channel(server.url), title="t", body="b", payload={"a": 1})
    assert len(server.requests) == channels.WEBHOOK_ATTEMPTS


def test_an_unreachable_receiver_fails_within_the_attempts():
    with pytest.raises(RuntimeError, match="not reached"):
        channels.send_channel("etlhook://127.0.0.1:9/none", title="t", body="b", payload={"a": 1})
    with pytest.raises(channels.ServiceError, match="notifies on the scheduler's own machine"):  # issue 33
        channels.send_channel("file:///etc/passwd", title="t", body="b", payload={"a": 1})
    with pytest.raises(channels.ServiceError, match="not a URL Apprise can send to"):
        channels.send_channel("nosuchscheme://etc/passwd", title="t", body="b", payload={"a": 1})


def test_a_breaker_that_opens_alerts_once_per_opening(make_schedule, now, settings):
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1, breaker_threshold=1)
    _fail_once(schedule, now)
    schedule.refresh_from_db()
    assert schedule.breaker_status == "open"
    breaker = Alert.objects.get(kind=AlertKind.BREAKER_OPENED)
    assert breaker.incident_key == f"breaker_opened:{schedule.pk}:{schedule.breaker_opened_at.isoformat()}"
    assert "opened" in breaker.message
    assert {m.subject.split(":")[0] for m in mail.outbox} == {
        "[etl] Run failed for good",
        "[etl] Circuit breaker opened",
    }


def test_a_dependency_timeout_is_its_own_kind_of_alert(make_schedule, now, settings):
    from scheduler.services.cluster.governance import dependency_timeouts

    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    up = make_schedule("up")
    down = make_schedule("down", depends_on=["up"], max_wait_seconds=60)
    run = run_trigger_manual(schedule=down, actor="tests", now=now)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.WAITING, reason="waiting for up")
    assert dependency_timeouts(now=now + timedelta(seconds=61)) == [run.pk]
    alert = Alert.objects.get()
    assert alert.kind == AlertKind.DEPENDENCY_TIMEOUT and alert.incident_key == f"dependency_timeout:{run.pk}"
    assert up.pk and "dependency timeout" in mail.outbox[0].body


def test_a_late_governance_loop_alerts_once_per_outage(now, settings):
    settings.ETL_GOVERNANCE_INTERVAL = 15
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    GovernanceTick.objects.create(started_at=now, holder="c1")
    assert alerts.governance_late_alert(now=now + timedelta(seconds=30)) is None
    first = alerts.governance_late_alert(now=now + timedelta(seconds=60))
    assert first is not None and first.kind == AlertKind.GOVERNANCE_LATE and "late" in first.message
    assert alerts.governance_late_alert(now=now + timedelta(hours=5)) is None  # the same outage
    GovernanceTick.objects.create(started_at=now + timedelta(hours=6), holder="c2")
    assert alerts.governance_late_alert(now=now + timedelta(hours=6, seconds=10)) is None  # recovered
    assert alerts.governance_late_alert(now=now + timedelta(hours=7)) is not None  # a new outage
    assert len(mail.outbox) == 2


def test_no_tick_yet_is_late_only_once_the_dispatcher_has_run_for_a_while(now, settings):
    settings.ETL_GOVERNANCE_INTERVAL = 15
    settings.ETL_LEASE_SECONDS = 20
    assert alerts.governance_late_alert(now=now) is None  # a fresh install
    LoopLease.objects.create(name="dispatch", holder="c1", acquired_at=now, expires_at=now + timedelta(seconds=20))
    assert alerts.governance_late_alert(now=now + timedelta(seconds=30)) is None
    alert = alerts.governance_late_alert(now=now + timedelta(seconds=70))
    assert alert.incident_key == "governance_late:never" and "never run" in alert.message


def test_the_dispatch_loop_checks_governance_at_most_once_a_minute(now, settings):
    settings.ETL_GOVERNANCE_INTERVAL = 1
    GovernanceTick.objects.create(started_at=now - timedelta(minutes=10), holder="c1")
    with mock.patch.object(alerts, "governance_late_alert", wraps=alerts.governance_late_alert) as check:
        for second in range(0, 70, 5):
            dispatch_tick(now=now + timedelta(seconds=second), holder="test")
    assert check.call_count == 2
    assert Alert.objects.filter(kind=AlertKind.GOVERNANCE_LATE).count() == 1


def test_the_watchdog_never_breaks_the_dispatch_tick(now):
    with mock.patch.object(alerts, "governance_late_alert", side_effect=RuntimeError("db down")):
        alerts.governance_watchdog(now=now)  # logged, not raised


def test_an_alert_left_sending_by_a_dead_process_is_released_by_governance_and_sent(now, settings):
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    alert = Alert.objects.create(kind=AlertKind.RUN_FAILED, incident_key="run_failed:999", message="lost",
                                 channels=alerts.channels_for(None), created_at=now, status=AlertStatus.SENDING,
                                 claimed_at=now, attempts=1)
    assert alerts.governance_alerts(now=now + timedelta(minutes=1)) == []  # its sender may still be at work
    assert alerts.alerts_claim(now=now + timedelta(minutes=1), limit=5) == []
    later = now + alerts.CLAIM_TIMEOUT + timedelta(seconds=1)
    assert alerts.governance_alerts(now=later) == [alert.pk]
    assert alerts.alerts_claim(now=later, limit=5) == [alert.pk]
    assert alerts.alert_deliver(alert.pk, now=later) == AlertStatus.SENT
    alert.refresh_from_db()
    assert alert.status == AlertStatus.SENT and alert.attempts == 2 and len(mail.outbox) == 1


def test_a_claim_is_a_compare_and_set(now, settings):
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    settings.ETL_ALERTS_SYNC = False
    alert = alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key="k-claim", message="m", now=now)
    assert alerts.alerts_claim(now=now, limit=5) == [alert.pk]
    assert alerts.alerts_claim(now=now, limit=5) == []  # a second sender finds nothing to take
    assert Alert.objects.get().status == AlertStatus.SENDING


def test_a_failed_delivery_waits_twice_as_long_each_time_then_stops(now, settings):
    settings.ETL_ALERTS_SYNC = False
    alert = Alert.objects.create(kind=AlertKind.RUN_FAILED, incident_key="k-fail", message="m", created_at=now,
                                 channels=[{"type": "webhook", "url": "ftp://nowhere"}])
    waits = []
    at = now
    for _ in range(alerts.MAX_DELIVERIES):
        assert alerts.alerts_claim(now=at, limit=1) == [alert.pk]
        assert alerts.alert_deliver(alert.pk, now=at) == AlertStatus.FAILED
        alert.refresh_from_db()
        if alert.next_attempt_at is None:
            break
        waits.append(alert.next_attempt_at - at)
        assert alerts.alerts_claim(now=alert.next_attempt_at - timedelta(seconds=1), limit=1) == []
        at = alert.next_attempt_at
    assert waits == [alerts.RESEND_AFTER * 2 ** n for n in range(alerts.MAX_DELIVERIES - 1)]
    assert alert.attempts == alerts.MAX_DELIVERIES and alerts.alerts_claim(now=at + timedelta(days=9), limit=1) == []


def test_an_alert_storm_starts_no_thread_and_queues_in_the_table(now, settings):
    settings.ETL_ALERTS_SYNC = False
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    before = threading.active_count()
    for i in range(200):
        alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key=f"storm:{i}", message="m", now=now)
    assert threading.active_count() == before
    assert Alert.objects.filter(status=AlertStatus.PENDING).count() == 200 and not mail.outbox


def test_the_sender_never_holds_more_alerts_than_it_has_threads(now, settings):
    settings.ETL_ALERTS_SYNC = False
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    for i in range(5):
        alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key=f"b:{i}", message="m", now=now)
    release, delivered = threading.Event(), []

    def slow_delivery(alert_id, **kwargs):
        release.wait(30)
        delivered.append(alert_id)

    sender = alerts.AlertSender(workers=2)
    with mock.patch.object(alerts, "alert_deliver", slow_delivery):
        first = sender.pump(now=now)
        assert len(first) == 2 and sender.pump(now=now) == []  # both threads busy: nothing more is claimed
        release.set()
        sender.shutdown()
    assert sorted(delivered) == sorted(first)
    assert Alert.objects.filter(status=AlertStatus.PENDING).count() == 3


def test_without_channels_an_alert_is_recorded_and_nothing_is_sent(make_schedule, now):
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1)
    _fail_once(schedule, now)
    alert = Alert.objects.get()
    assert alert.channels == [] and alert.status == AlertStatus.SENT and not mail.outbox


def test_delivery_happens_off_the_callers_thread_by_default(make_schedule, now, settings):
    settings.ETL_ALERTS_SYNC = False
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    alert = alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key="k1", message="m", now=now)
    assert Alert.objects.get().status == AlertStatus.PENDING and not mail.outbox
    assert alerts.alerts_claim(now=now, limit=1) == [alert.pk]  # a cluster's alerts loop takes it from the table


# --- alert webhook URLs into the scheduler's own network --------------------------------------

@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/x", "http://localhost/hook", "http://169.254.169.254/latest",
                                 "http://10.1.2.3/a", "http://192.168.0.9/", "http://[::1]/a", "http://0.0.0.0/",
                                 "http://[::ffff:127.0.0.1]/a", "https://172.16.0.1/", "http://api.localhost/"])
def test_an_alert_webhook_into_a_private_range_is_refused_at_save(make_schedule, settings, url):
    from scheduler.services.common.errors import ServiceError

    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    with pytest.raises(ServiceError) as info:
        make_schedule("s-private", alert_channels=[alerts.webhook_to_channel(url)])
    assert info.value.field == "alert_channels" and "ETL_ALERT_ALLOW_PRIVATE_URLS" in str(info.value)


def test_a_private_alert_webhook_is_allowed_by_the_setting(make_schedule, settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True
    assert make_schedule("s-internal", alert_channels="etlhook://10.1.2.3/hook").alert_channels


def test_a_public_alert_webhook_is_accepted(make_schedule, settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    assert make_schedule("s-public", alert_channels="etlhooks://hooks.example.com/etl").alert_channels


def test_delivery_checks_the_address_again_after_name_resolution(now, settings, monkeypatch):
    import socket

    from scheduler.services.common import netcheck

    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    settings.ETL_ALERT_WEBHOOK_URL = "https://hooks.example.com/etl"  # public when saved, internal when sent
    monkeypatch.setattr(netcheck.socket, "getaddrinfo",
                        lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", 443))])
    posted = []
    monkeypatch.setattr(channels.NotifySignedJSON, "send", lambda *a, **k: posted.append(a))
    alert = alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key="k-private", message="m", now=now)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.FAILED and "10.0.0.5" not in alert.error and "hooks.example.com" in alert.error
    assert "ETL_ALERT_ALLOW_PRIVATE_URLS" in alert.error and posted == []
