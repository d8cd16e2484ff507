"""CSRF stays on for every POST route, and secrets never reach pages, logs or the audit log."""
from __future__ import annotations

import logging
import time
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import Client

from scheduler.models import AuditEntry
from scheduler.services.admission.webhooks import sign_webhook
from tests.views.test_permissions import AUTH_PAGES, OWN_CREDENTIALS, _state, _urls, world  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user(make_user):
    return make_user("ada", "admin", is_staff=True, is_superuser=True)


def test_every_post_route_refuses_a_request_without_a_csrf_token(admin_user, world):  # noqa: F811
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    before = _state()
    checked = 0
    for name, url in _urls(world):
        if name in OWN_CREDENTIALS | AUTH_PAGES:
            continue  # HMAC / bearer-token endpoints carry their own credentials and are csrf_exempt by design
        response = client.post(url, {"reason": "x", "value": "5", "params": "{}", "enabled": "0", "action": "disable",
                                     "_selected_action": [world["schedule_id"]], "post": "yes"})
        assert response.status_code == 403, (name, url, response.status_code)
        checked += 1
    assert checked > 20 and _state() == before


@pytest.fixture
def hook(make_schedule):
    return make_schedule("shop-hook", trigger_kind="webhook")


def test_no_page_shows_a_webhook_secret(client, admin_user, world, hook):  # noqa: F811
    from django.urls import reverse

    client.force_login(admin_user)
    urls = [url for name, url in _urls(world) if name not in OWN_CREDENTIALS | AUTH_PAGES]
    urls += [reverse("scheduler:schedule_detail", args=[hook.pk]), f"/admin/scheduler/schedule/{hook.pk}/change/",
             "/admin/scheduler/schedule/?q=shop", "/admin/scheduler/auditentry/", reverse("scheduler:audit_csv")]
    rendered = 0
    for url in urls:
        response = client.get(url, headers={"HX-Request": "true"} if rendered % 2 else {})
        if response.status_code != 200:
            continue
        body = b"".join(response) if response.streaming else response.content
        assert hook.webhook_secret.encode() not in body, url
        rendered += 1
    assert rendered > 15


def test_the_rotate_command_shows_the_new_secret_once_and_never_the_old_one(hook, capsys):
    old = hook.webhook_secret
    call_command("rotate_webhook_secret", hook.name, "--reason", "leaked")
    hook.refresh_from_db()
    out = capsys.readouterr().out
    assert hook.webhook_secret in out and old not in out
    dumped = " ".join(str(v) for v in AuditEntry.objects.values_list("before", "after", "reason", "target_repr"))
    assert old not in dumped and hook.webhook_secret not in dumped


def test_a_webhook_refusal_logs_and_audits_no_secret(client, hook, caplog):
    caplog.set_level(logging.DEBUG)
    body = b'{"order": 1}'
    good = sign_webhook(hook.webhook_secret, body, int(time.time()))
    for headers in (sign_webhook("guess", body, int(time.time())), {**good, "X-Etl-Signature": "sha256=" + "0" * 64},
                    sign_webhook(hook.webhook_secret, body, int(time.time()) - 9999)):
        assert client.post(f"/hooks/{hook.name}", data=body, content_type="application/json",
                           headers=headers).status_code == 401
    # neither the secret nor the valid signature it would produce may leak
    leaks = {hook.webhook_secret, good["X-Etl-Signature"].split("=", 1)[1]}
    logged = "\n".join(r.getMessage() + str(r.args) for r in caplog.records)
    audited = " ".join(str(v) for v in AuditEntry.objects.values_list("before", "after", "reason", "target_repr",
                                                                         "actor"))
    # two bad signatures count under one entry, the stale timestamp under another
    assert AuditEntry.objects.filter(action="webhook.refused").count() == 2
    for secret in leaks:
        assert secret not in logged and secret not in audited


@pytest.mark.django_db(transaction=True)  # the dispatch hands runs over on commit
def test_an_alert_delivery_logs_no_secret(make_schedule, settings, caplog, now):
    from scheduler.models import Alert, RunStatus
    from scheduler.services.admission.dispatch import dispatch_tick
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_trigger_manual

    secret = "alert-secret-5b9f0c2e7d"
    settings.ETL_ALERT_WEBHOOK_SECRET = secret
    settings.ETL_ALERTS_SYNC = True
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True
    caplog.set_level(logging.DEBUG)
    # nothing listens on port 9: the delivery fails and its error is logged and stored
    schedule = make_schedule("flaky", target_id="demo.flaky", retry_max_attempts=1,
                             alert_channels="etlhook://127.0.0.1:9/alerts")
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"fail": True}, now=now)
    sent = []
    with (
        mock.patch(
            "scheduler.services.admission.dispatch.enqueue_execution", side_effect=lambda r, t: sent.append((r, t))
        ),
        mock.patch("scheduler.services.integrations.channels.WEBHOOK_WAIT", 0.0),
    ):
        dispatch_tick(now=now, holder="tests")
        for run_id, token in sent:
            execute_run(run_id, token, clock=lambda: now)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    alert = Alert.objects.get()
    logged = "\n".join(r.getMessage() + str(r.args) + str(r.exc_text or "") for r in caplog.records)
    assert secret not in logged and secret not in alert.error and secret not in alert.message
    assert secret not in " ".join(str(v) for v in AuditEntry.objects.values_list("before", "after", "reason"))


def test_no_audit_entry_ever_holds_a_secret(make_schedule, client):
    from scheduler.services.admission.webhooks import webhook_rotate_secret

    hook = make_schedule("hook2", trigger_kind="webhook")
    secrets = {hook.webhook_secret}
    for _ in range(2):
        secrets.add(webhook_rotate_secret(schedule=hook, actor="tests", reason="rotate"))
    body = b"{}"
    client.post(f"/hooks/{hook.name}", data=body, content_type="application/json",
                headers=sign_webhook(min(secrets), body, int(time.time())))
    for entry in AuditEntry.objects.all():
        text = f"{entry.before} {entry.after} {entry.reason} {entry.target_repr} {entry.actor}"
        assert not any(secret in text for secret in secrets), entry.action
