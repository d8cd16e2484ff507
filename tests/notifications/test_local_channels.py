"""Channels that notify on the server itself (syslog://, the desktop's D-Bus, a USB light) or read one of its
files (keyfile=) are refused at save and before sending, unless ETL_ALERT_ALLOW_LOCAL_CHANNELS is on (issue 33)."""

from __future__ import annotations

import apprise.plugins.syslog as apprise_syslog
import pytest

from scheduler.models import Schedule, Team
from scheduler.services.integrations import channels
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import team_save

pytestmark = pytest.mark.django_db

LOCAL = [
    "syslog://",
    "syslog://local5",
    "SysLog://",
    "dbus://",
    "kde://",
    "qt://",
    "glib://",
    "gio://",
    "gnome://",
    "macosx://",
    "windows://",
    "blink1://",
    "file:///var/log/syslog",
]


def test_the_local_schemes_are_read_from_apprises_own_plugins():
    assert {
        "syslog",
        "dbus",
        "kde",
        "qt",
        "glib",
        "gio",
        "gnome",
        "macosx",
        "windows",
        "blink1",
    } <= channels.local_schemes()
    assert not {"rsyslog", "json", "mailto", "slack", "ntfy"} & channels.local_schemes()  # these go over the network


@pytest.mark.parametrize("url", LOCAL)
def test_a_local_channel_is_refused_at_every_save_naming_the_field(make_schedule, url):
    with pytest.raises(ServiceError, match="scheduler's own machine") as info:
        make_schedule("orders", alert_channels=["mailto://ok@example.com", url])
    assert info.value.field == "alert_channels" and "ETL_ALERT_ALLOW_LOCAL_CHANNELS" in str(info.value)
    with pytest.raises(ServiceError, match="scheduler's own machine"):
        team_save(data={"name": "ml", "alert_channels": url}, actor="tests")
    assert not Schedule.objects.exists() and not Team.objects.filter(name="ml").exists()


@pytest.mark.parametrize(
    "url", ["fcm://project/device?keyfile=/etc/etl/secret_key", "vapid://user@example.com/target?subfile=/etc/passwd"]
)
def test_a_url_naming_a_file_of_the_server_is_refused(make_schedule, url):
    with pytest.raises(ServiceError, match="names a file on the scheduler's own machine"):
        make_schedule("orders", alert_channels=url)


def test_the_setting_allows_local_channels(make_schedule, settings, monkeypatch):
    settings.ETL_ALERT_ALLOW_LOCAL_CHANNELS = True
    assert make_schedule("orders", alert_channels="syslog://").alert_channels == "syslog://"
    written = []
    monkeypatch.setattr(apprise_syslog.syslog, "syslog", lambda *args: written.append(args))
    channels.send_channel("syslog://", title="run failed", body="orders failed", payload={})
    assert written  # what the refusal below keeps from happening


def test_a_local_channel_stored_before_the_check_is_not_sent(monkeypatch):
    written = []
    monkeypatch.setattr(apprise_syslog.syslog, "syslog", lambda *args: written.append(args))
    with pytest.raises(ServiceError, match="scheduler's own machine"):
        channels.send_channel("syslog://", title="run failed", body="orders failed", payload={})
    assert written == []
