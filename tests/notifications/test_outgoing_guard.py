"""Alert channels reach only global addresses: 100.64/10 and 6to4 refused, every hop checked, the checked
address pinned for the connection (DNS rebinding), an allowed network let through (issue 22)."""
from __future__ import annotations

import socket

import pytest

from scheduler.models import AlertKind, AlertStatus
from scheduler.pipelines import netguard
from scheduler.services.oversight import alerts
from scheduler.services.common.errors import ServiceError
from scheduler.services.common.netcheck import check_outgoing_url

pytestmark = pytest.mark.django_db(transaction=True)


class Rebinding:
    """The first answer for a name is `first`, every later one `then`; literals resolve to themselves."""

    def __init__(self, first: str, then: str) -> None:
        self.first, self.then, self.calls = first, then, []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002
        self.calls.append(host)
        try:
            socket.inet_aton(host)
            address = host
        except OSError:
            address = self.first if self.calls.count(host) == 1 else self.then
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port if isinstance(port, int) else 443))]


@pytest.fixture
def guarded(settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    settings.ETL_OUTGOING_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # where the test receiver listens


@pytest.mark.parametrize("url", ["https://100.64.0.1/", "https://[2002:7f00:1::]/", "https://[64:ff9b::a00:5]/",
                                 "https://198.18.0.1/"])
def test_addresses_that_are_not_global_are_refused_at_save(settings, url):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    with pytest.raises(ServiceError) as info:
        check_outgoing_url(url, field="alert_channels")
    assert info.value.field == "alert_channels" and "not global" in info.value.problem


def _raise(schedule, now):
    alert = alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key="k", message="m", schedule=schedule, now=now)
    alert.refresh_from_db()
    return alert


def test_the_connection_goes_to_the_address_the_guard_checked(guarded, make_schedule, receiver, monkeypatch, now):
    server = receiver()
    stub = Rebinding("127.0.0.1", "10.0.0.5")  # checked, then rebound inside before Apprise connects
    monkeypatch.setattr(netguard, "_system_getaddrinfo", stub)
    schedule = make_schedule("orders", alert_channels=f"json://hooks.example:{server.port}/alerts")
    alert = _raise(schedule, now)
    assert alert.status == AlertStatus.SENT and len(server.requests) == 1
    assert stub.calls.count("hooks.example") == 1


def test_a_redirect_into_the_metadata_address_is_not_followed(guarded, make_schedule, receiver, monkeypatch, now):
    server = receiver(statuses=[(307, "http://169.254.169.254/latest/meta-data/")] * 3)
    stub = Rebinding("127.0.0.1", "127.0.0.1")
    monkeypatch.setattr(netguard, "_system_getaddrinfo", stub)
    schedule = make_schedule("orders", alert_channels=f"json://hooks.example:{server.port}/alerts")
    alert = _raise(schedule, now)
    assert alert.status == AlertStatus.FAILED
    assert "169.254.169.254" not in stub.calls or all(r["path"] == "/alerts" for r in server.requests)


def test_a_name_that_resolves_into_100_64_is_refused_before_sending(settings, make_schedule, receiver, monkeypatch,
                                                                   now):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    server = receiver()
    monkeypatch.setattr(netguard, "_system_getaddrinfo", Rebinding("100.64.0.7", "100.64.0.7"))
    schedule = make_schedule("orders", alert_channels=f"json://hooks.example:{server.port}/alerts")
    alert = _raise(schedule, now)
    assert alert.status == AlertStatus.FAILED and not server.requests
    assert "100.64.0.7" not in alert.error and "ETL_OUTGOING_ALLOWED_NETWORKS" in alert.error
