"""A real cluster delivers alerts from their table: a storm waits there, nothing is lost when a cluster dies."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.utils import timezone

from scheduler.models import Alert, AlertKind, AlertStatus
from scheduler.services.oversight import alerts
from tests.integration.cluster import kill_cluster, start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def receiver():
    received: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/alerts", received
    server.shutdown()
    server.server_close()


def test_a_cluster_sends_a_storm_of_alerts_from_the_table_once_each(receiver, settings, tmp_path):
    url, received = receiver
    # the cluster lives in real time: alerts dated by the frozen `now` fixture (months ago) are past their
    # retention, and the cluster's prune loop rightly deletes the SENT ones mid-test
    now = timezone.now()
    settings.ETL_ALERTS_SYNC = False
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True
    settings.ETL_ALERT_WEBHOOK_URL = url
    for i in range(30):
        alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key=f"storm:{i}", message=f"storm {i}", now=now)
    # one left SENDING by a cluster that died mid-delivery long ago: governance releases it
    lost = Alert.objects.get(incident_key="storm:0")
    Alert.objects.filter(pk=lost.pk).update(status=AlertStatus.SENDING, claimed_at=now - alerts.CLAIM_TIMEOUT * 2)
    log = tmp_path / "cluster.log"
    env = {"ETL_ALERT_ALLOW_PRIVATE_URLS": "true", "ETL_ALERT_WORKERS": "2", "ETL_ALERT_INTERVAL": "0.2"}
    first = start_cluster("alerts1", log_path=log, extra_env=env)
    try:
        wait_until(lambda: len(received) >= 5, timeout=60, what="the first alerts", log_path=log)
    finally:
        kill_cluster(first)  # dies mid-storm: what it had claimed stays SENDING until released
    Alert.objects.filter(status=AlertStatus.SENDING).update(claimed_at=now - alerts.CLAIM_TIMEOUT * 2)
    second = start_cluster("alerts2", log_path=log, extra_env=env)
    try:
        # only the storm's alerts: the takeover may rightly raise its own "governance loop is late" alert
        storm = Alert.objects.filter(incident_key__startswith="storm:")
        wait_until(lambda: storm.filter(status=AlertStatus.SENT).count() == 30, timeout=90,
                   what="every alert of the storm SENT", log_path=log)
    finally:
        assert stop_cluster(second) == 0
    messages = sorted(body.decode() for body in received)
    assert len({m for m in messages}) == 30, "every alert arrived"
    # at-least-once: only an alert whose sender was killed mid-delivery may arrive twice
    assert len(messages) - 30 <= 2
