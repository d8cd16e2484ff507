"""Alerts through Apprise: json:// to a local receiver, mailto:// through Django's mail, the signed etlhook://,
the SSRF guard at save and again before sending, and the global ETL_ALERT_URLS."""
from __future__ import annotations

import json
import logging
import socket

import pytest
from apprise.plugins.custom_json import NotifyJSON
from django.core import mail

from scheduler.models import Alert, AlertKind, AlertStatus
from scheduler.services.oversight import alerts
from scheduler.services.integrations import channels
from scheduler.services.common import netcheck
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import team_save
from scheduler.services.admission.webhooks import compute_signature

pytestmark = pytest.mark.django_db(transaction=True)  # delivery closes connections a test transaction would hold


def _raise(schedule=None, key="k1", now=None):
    return alerts.alert_raise(kind=AlertKind.RUN_FAILED, incident_key=key, message="run 7 failed\nsecond line",
                              schedule=schedule, now=now)


def _resolves_to(monkeypatch, address):
    monkeypatch.setattr(netcheck.socket, "getaddrinfo",
                        lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 443))])


def test_a_json_channel_posts_apprises_json_to_a_local_receiver(make_schedule, receiver, now):
    server = receiver()
    schedule = make_schedule("orders", alert_channels=server.url("json"))
    alert = _raise(schedule, now=now)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.SENT and alert.attempts == 1
    (request,) = server.requests
    body = json.loads(request["body"])
    assert request["path"] == "/alerts" and body["type"] == "failure"
    assert body["title"].startswith("[etl] Run failed for good: run 7 failed") and "second line" in body["message"]


def test_a_json_channel_that_answers_500_fails_the_alert_for_a_retry_and_masks_the_error(make_schedule, receiver,
                                                                                          now, caplog):
    server = receiver(statuses=[500])
    url = f"json://user:hunter2-secret@127.0.0.1:{server.port}/alerts"
    schedule = make_schedule("orders", alert_channels=url)
    caplog.set_level(logging.DEBUG)
    alert = _raise(schedule, now=now)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.FAILED and alert.next_attempt_at is not None
    assert "json://user:****@127.0.0.1" in alert.error and "hunter2-secret" not in alert.error
    assert "hunter2-secret" not in caplog.text


def test_plain_mailto_channels_go_through_djangos_mail_as_one_message(make_schedule, now):
    team_save(data={"name": "billing", "alert_channels": "mailto://billing@example.com"}, actor="tests")
    schedule = make_schedule("invoices", owner="billing",
                             alert_channels="mailto://lead@example.com\nmailto://billing@example.com")
    assert _raise(schedule, now=now).pk
    assert [m.to for m in mail.outbox] == [["lead@example.com", "billing@example.com"]]
    assert mail.outbox[0].subject.startswith("[etl] Run failed for good")
    assert Alert.objects.get().status == AlertStatus.SENT


def test_a_mailto_with_to_recipients_reaches_each(make_schedule, now):
    schedule = make_schedule("orders", alert_channels="mailto://etl@example.com?to=a@example.com,b@example.com")
    _raise(schedule, now=now)
    assert sorted(mail.outbox[0].to) == ["a@example.com", "b@example.com"]


def test_a_mailto_with_cc_and_bcc_copies_them_in_an_alert_and_a_test(make_schedule, now):
    url = "mailto://etl@example.com?to=a@example.com&cc=boss@example.com&bcc=audit@example.com"
    schedule = make_schedule("orders", alert_channels=url)
    _raise(schedule, now=now)
    channels.send_channel(url, title="[etl] Test notification", body="b", payload={})
    assert [(m.to, m.cc, m.bcc) for m in mail.outbox] == [
        (["a@example.com"], ["boss@example.com"], ["audit@example.com"])] * 2


def test_a_mailto_with_an_smtp_login_is_apprises_and_guarded(make_schedule, settings):
    url = "mailto://bot:app-password@127.0.0.1:2525?to=oncall@example.com&from=etl@example.com"
    plugin = channels.parse_channel(url, field="alert_channels")
    assert not channels.uses_django_mail(url, plugin)
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    with pytest.raises(ServiceError, match="points at 127.0.0.1") as info:
        make_schedule("orders", alert_channels=url)
    assert info.value.field == "alert_channels" and "app-password" not in str(info.value)


def test_an_etlhook_channel_of_a_team_is_signed_with_the_teams_secret(make_schedule, receiver, now):
    server = receiver()
    team = team_save(data={"name": "billing", "alert_channels": server.url("etlhook")}, actor="tests")
    assert team.alert_webhook_secret  # made when a signed channel is saved
    schedule = make_schedule("invoices", owner="billing")
    _raise(schedule, now=now)
    (request,) = server.requests
    headers = request["headers"]
    expected = compute_signature(team.alert_webhook_secret, request["body"], headers["X-Etl-Timestamp"])
    assert headers["X-Etl-Signature"] == f"sha256={expected}"
    payload = json.loads(request["body"])
    assert payload["schedule"] == "invoices" and payload["kind"] == "run_failed"


def test_the_global_channels_are_etl_alert_urls_and_the_old_settings(settings, receiver, now):
    server = receiver()
    settings.ETL_ALERT_URLS = [server.url("json", "/global")]
    settings.ETL_ALERT_EMAILS = ["ops@example.com"]
    settings.ETL_ALERT_WEBHOOK_URL = f"http://127.0.0.1:{server.port}/old"
    settings.ETL_ALERT_WEBHOOK_SECRET = "old-secret"
    assert [c["url"] for c in alerts.channels_for(None)] == [
        server.url("json", "/global"), "mailto://ops@example.com", server.url("etlhook", "/old")]
    _raise(None, now=now)
    assert sorted(r["path"] for r in server.requests) == ["/global", "/old"]
    old = next(r for r in server.requests if r["path"] == "/old")
    assert old["headers"]["X-Etl-Signature"] == "sha256=" + compute_signature(
        "old-secret", old["body"], old["headers"]["X-Etl-Timestamp"])
    assert [m.to for m in mail.outbox] == [["ops@example.com"]]


def test_etl_alert_urls_splits_on_spaces_and_commas_but_not_inside_a_url(monkeypatch):
    import importlib

    import etlsite.settings_alerts as site  # where ETL_ALERT_URLS is read

    monkeypatch.setenv("ETL_ALERT_URLS", "mailto://a@x.com?to=b@x.com,c@x.com, slack://T1/B2/C3\njson://h/p")
    try:
        assert importlib.reload(site).ETL_ALERT_URLS == ["mailto://a@x.com?to=b@x.com,c@x.com", "slack://T1/B2/C3",
                                                         "json://h/p"]
    finally:
        monkeypatch.delenv("ETL_ALERT_URLS")
        importlib.reload(site)


# --- the SSRF guard ---------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["json://127.0.0.1:8000/x", "jsons://localhost/hook", "xml://169.254.169.254/latest",
                                 "form://10.1.2.3/a", "ntfy://192.168.0.9/topic", "etlhook://[::1]/a",
                                 "gotify://172.16.0.1/token", "json://api.localhost/", "json://[::1]:8080/x",
                                 "jsons://[fe80::1]/x"])
def test_the_guard_refuses_a_private_target_at_save_naming_the_field(make_schedule, settings, url):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    with pytest.raises(ServiceError, match="ETL_ALERT_ALLOW_PRIVATE_URLS") as info:
        make_schedule("orders", alert_channels=url)
    assert info.value.field == "alert_channels"


@pytest.mark.parametrize("url", ["slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ", "ntfy://my-topic",
                                 "jsons://hooks.example.com/etl", "mailto://ops@example.com"])
def test_public_and_cloud_channels_pass_the_guard(make_schedule, settings, url):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    assert make_schedule("orders", alert_channels=url).alert_channels == url


def test_the_guard_runs_again_after_name_resolution_right_before_sending(make_schedule, settings, monkeypatch,
                                                                          receiver, now):
    server = receiver()
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    schedule = make_schedule("orders", alert_channels="jsons://hooks.example.com/etl")  # public when saved
    _resolves_to(monkeypatch, "10.0.0.5")  # ... internal when sent
    sent = []
    monkeypatch.setattr(NotifyJSON, "send", lambda self, *a, **k: sent.append(1) or True)
    alert = _raise(schedule, now=now)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.FAILED and sent == [] and not server.requests
    assert "hooks.example.com" in alert.error and "ETL_ALERT_ALLOW_PRIVATE_URLS" in alert.error


def test_with_private_urls_allowed_the_receiver_on_loopback_is_reached(make_schedule, settings, receiver, now):
    server = receiver()
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True
    _raise(make_schedule("orders", alert_channels=server.url("json")), now=now)
    assert len(server.requests) == 1


def test_the_guard_refuses_when_it_is_off_even_for_a_channel_stored_earlier(make_schedule, settings, receiver, now):
    server = receiver()
    schedule = make_schedule("orders", alert_channels=server.url("json"))  # saved while allowed
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    alert = _raise(schedule, now=now)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.FAILED and not server.requests and "127.0.0.1" in alert.error


def test_a_bad_global_channel_fails_the_system_check_naming_the_setting(settings):
    assert alerts.check_global_channels() == []
    settings.ETL_ALERT_URLS = ["slak://T1/B2/C3"]
    (error,) = alerts.check_global_channels()
    assert error.id == "scheduler.E017" and "ETL_ALERT_URLS: 'slak://T1/B2/C3' is not a URL Apprise" in error.msg
    settings.ETL_ALERT_URLS = []
    settings.ETL_ALERT_WEBHOOK_URL = "ftp://old"
    (error,) = alerts.check_global_channels()
    assert "ETL_ALERT_WEBHOOK_URL: must be an http:// or https:// URL" in error.msg


@pytest.mark.parametrize("scheme", ["json", "etlhook"])
def test_a_redirect_is_not_followed_past_the_guard(make_schedule, receiver, scheme, now):
    inside = receiver()
    server = receiver(statuses=[(302, inside.url("http", "/metadata"))] * 5)
    schedule = make_schedule("orders", alert_channels=server.url(scheme) + "?redirect=yes")
    alert = _raise(schedule, now=now)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.FAILED and not inside.requests and server.requests


# --- the signed webhook is Apprise's JSON plugin: no sender of our own on the path ----------------------------

def test_the_signed_webhook_is_an_apprise_json_plugin_sent_by_apprise(receiver):
    plugin = channels.parse_channel("etlhooks://u:pw@hooks.example.com:8443/etl?+X-Team=ml", field="alert_channels")
    assert isinstance(plugin, NotifyJSON)  # parsing, privacy, headers, timeouts and retries are Apprise's
    assert (plugin.request_url, plugin.headers) == ("https://hooks.example.com:8443/etl", {"X-Team": "ml"})
    assert not hasattr(channels, "post_json")  # no sender of our own is left
    server = receiver()
    channels.send_channel(server.url("etlhook") + "?+X-Team=ml", title="t", body="b", payload={"alert": 1},
                          secret="s3")
    (request,) = server.requests
    assert json.loads(request["body"]) == {"alert": 1} and request["headers"]["X-Team"] == "ml"
    assert request["headers"]["X-Etl-Signature"] == "sha256=" + compute_signature(
        "s3", request["body"], request["headers"]["X-Etl-Timestamp"])


def test_an_old_webhook_urls_query_string_still_reaches_the_receiver(receiver, settings):
    """An alert_webhook_url with a query (a token, a channel) became etlhooks://...?...: it is posted as before."""
    server = receiver()
    settings.ETL_ALERT_WEBHOOK_URL = f"http://127.0.0.1:{server.port}/old?token=abc&room=etl"
    (channel,) = alerts.global_channel_urls()
    channels.send_channel(channel["url"], title="t", body="b", payload={"alert": 1}, secret="s3")
    assert [r["path"] for r in server.requests] == ["/old?token=abc&room=etl"]
    assert "abc" not in channels.mask_url(channel["url"])


def test_the_signed_webhook_retries_within_a_delivery_by_apprises_retry_setting(receiver):
    server = receiver(statuses=[500, 500, 500, 500])
    with pytest.raises(RuntimeError, match="500"):
        channels.send_channel(server.url("etlhook"), title="t", body="b", payload={"alert": 1}, secret="s3")
    assert len(server.requests) == channels.WEBHOOK_ATTEMPTS
    timestamps = [r["headers"]["X-Etl-Timestamp"] for r in server.requests]
    assert all(r["headers"]["X-Etl-Signature"] == "sha256=" + compute_signature("s3", r["body"], ts)
               for r, ts in zip(server.requests, timestamps))  # each attempt signed afresh
    server = receiver(statuses=[500, 500, 500, 500])
    channels.send_channel(server.url("etlhook") + "?retry=4", title="t", body="b", payload={"alert": 1})
    assert len(server.requests) == 5  # the URL's ?retry= is Apprise's, as for any channel
