"""The "send a test notification" button: POST + CSRF + change permission, the real guard + Apprise path,
the answer inline for htmx, audited with the channel masked."""
from __future__ import annotations

import json

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from scheduler.models import AuditEntry
from scheduler.services.oversight.channel_probe import TEST_TITLE, channel_test_send
from scheduler.services.common.errors import NotFound
from scheduler.services.access.teams import PermissionRefused, team_save

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def hooked(make_schedule, receiver):
    server = receiver()
    schedule = make_schedule("orders", alert_channels=[f"json://etl:hunter2-secret@127.0.0.1:{server.port}/alerts"])
    return schedule, server


def _url(schedule, index=0):
    return reverse("scheduler:schedule_channel_test", args=[schedule.pk, index])


def test_the_button_sends_through_apprise_and_answers_inline(admin_client, hooked):
    schedule, server = hooked
    response = admin_client.post(_url(schedule), **HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert "sent" in text and "json://etl:****@127.0.0.1" in text and "hunter2-secret" not in text
    (request,) = server.requests
    assert json.loads(request["body"])["title"] == TEST_TITLE
    entry = AuditEntry.objects.get(action="schedule.test_channel")
    assert entry.after["ok"] is True and "hunter2-secret" not in str(entry.after)


def test_a_refused_target_is_shown_inline_and_audited(admin_client, hooked, settings):
    schedule, server = hooked
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = False
    response = admin_client.post(_url(schedule), **HTMX)
    text = response.content.decode()
    assert response.status_code == 200 and "failed" in text and "ETL_ALERT_ALLOW_PRIVATE_URLS" in text
    assert not server.requests
    entry = AuditEntry.objects.get(action="schedule.test_channel")
    assert entry.after["ok"] is False and "127.0.0.1" in entry.after["error"]


def test_without_htmx_it_redirects_back_with_a_message(admin_client, hooked):
    schedule, _server = hooked
    response = admin_client.post(_url(schedule), follow=True)
    assert response.redirect_chain[-1][0] == reverse("scheduler:schedule_detail", args=[schedule.pk])
    assert any("Test notification sent" in str(m) for m in response.context["messages"])


def test_the_schedule_page_offers_the_button_to_whoever_may_change_it(admin_client, client, viewer, hooked):
    schedule, _server = hooked
    page = admin_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert _url(schedule) in page and "Send a test notification" in page
    client.force_login(viewer)
    assert _url(schedule) not in client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()


def test_a_viewer_is_refused_and_nothing_is_sent(client, viewer, hooked):
    schedule, server = hooked
    client.force_login(viewer)
    assert client.post(_url(schedule), **HTMX).status_code == 403
    assert not server.requests and not AuditEntry.objects.filter(action="schedule.test_channel").exists()


def test_it_needs_post_and_a_csrf_token(admin_user, hooked):
    schedule, server = hooked
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    assert strict.get(_url(schedule)).status_code == 405
    assert strict.post(_url(schedule), **HTMX).status_code == 403
    assert not server.requests


def test_an_unknown_channel_is_a_404(admin_client, hooked):
    schedule, _server = hooked
    assert admin_client.post(_url(schedule, 5), **HTMX).status_code == 404


def test_the_team_page_button_mails_through_django(admin_client, default_team):
    team = team_save(data={"name": "billing", "alert_channels": "mailto://billing@example.com"}, actor="tests")
    page = admin_client.get(reverse("scheduler:team_detail", args=[team.pk])).content.decode()
    url = reverse("scheduler:team_channel_test", args=[team.pk, 0])
    assert url in page
    response = admin_client.post(url, **HTMX)
    assert response.status_code == 200 and "sent" in response.content.decode()
    assert [(m.subject, m.to) for m in mail.outbox] == [(TEST_TITLE, ["billing@example.com"])]
    assert AuditEntry.objects.get(action="team.test_channel").target_repr == "billing"


def test_the_service_asks_the_one_authorization_function(make_user, hooked, now):
    schedule, server = hooked
    with pytest.raises(PermissionRefused):
        channel_test_send(target=schedule, index=0, actor=make_user("vera", "viewer"), now=now)
    with pytest.raises(NotFound, match="has no channel 3"):
        channel_test_send(target=schedule, index=3, actor="tests", now=now)
    assert channel_test_send(target=schedule, index=0, actor="tests", now=now)["ok"] is True
    assert len(server.requests) == 1
