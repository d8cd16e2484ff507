"""Hostile input over HTTP: webhooks, events, the dashboard's POST forms and the admin. 4xx, never 500, nothing
changed."""

from __future__ import annotations

import json
import time

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.models import AuditEntry, Run, Schedule
from scheduler.services.admission.webhooks import sign_webhook
from tests.security.hostile import counts, nasty_text

pytestmark = pytest.mark.django_db
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DEEP = b"[" * 100_000 + b"]" * 100_000
HOSTILE_BODIES = [DEEP, b'{"a": NaN}', b'{"a": Infinity}', b'{"a": "\\u0000"}', b'{"\\u0000": 1}', b"\xff\xfe",
                  b"[1, 2]", b'"text"', b"null", b"{" * 5000, b'{"a": ' + b"1" * 5000 + b"}"]


@pytest.fixture
def hook(make_schedule):
    return make_schedule("shop-hook", trigger_kind="webhook")


def _post(client, name, body, headers, content_type="application/json"):
    return client.post(f"/hooks/{name}", data=body, content_type=content_type, headers=headers)


# --- webhooks ----------------------------------------------------------------------------

def _refusal_cases(secret: str):
    now = int(time.time())
    good = sign_webhook(secret, b"{}", now)
    return {
        "wrong secret": (b"{}", sign_webhook("not-the-secret", b"{}", now), "application/json", 401),
        "missing signature": (b"{}", {"X-Etl-Timestamp": str(now)}, "application/json", 401),
        "malformed signature": (b"{}", {**good, "X-Etl-Signature": "sha256=zz"}, "application/json", 401),
        "missing timestamp": (b"{}", {"X-Etl-Signature": good["X-Etl-Signature"]}, "application/json", 401),
        "stale timestamp": (b"{}", sign_webhook(secret, b"{}", now - 3600), "application/json", 401),
        "future timestamp": (b"{}", sign_webhook(secret, b"{}", now + 3600), "application/json", 401),
        "body changed after signing": (b'{"a": 1}', good, "application/json", 401),
        "wrong content type": (b"{}", good, "text/plain", 415),
    }


@pytest.mark.parametrize("case", ["wrong secret", "missing signature", "malformed signature", "missing timestamp",
                                  "stale timestamp", "future timestamp", "body changed after signing",
                                  "wrong content type"])
def test_every_bad_webhook_is_a_4xx_audited_and_starts_no_run(client, hook, case):
    body, headers, content_type, status = _refusal_cases(hook.webhook_secret)[case]
    response = _post(client, hook.name, body, headers, content_type)
    assert response.status_code == status, response.content
    assert response.json()["error"]
    assert not Run.objects.exists()
    refusal = AuditEntry.objects.get(action="webhook.refused")
    assert refusal.target_id == str(hook.pk) and refusal.after["status"] == status


def test_a_replayed_webhook_is_a_409_audited_and_runs_once(client, hook):
    headers = sign_webhook(hook.webhook_secret, b"{}", int(time.time()))
    assert _post(client, hook.name, b"{}", headers).status_code == 202
    assert _post(client, hook.name, b"{}", headers).status_code == 409
    assert Run.objects.count() == 1 and AuditEntry.objects.filter(action="webhook.refused").count() == 1


def test_a_huge_webhook_body_is_a_413_audited_and_starts_no_run(client, hook, settings):
    settings.ETL_WEBHOOK_MAX_BYTES = 1024
    body = json.dumps({"x": "y" * 5000}).encode()
    response = _post(client, hook.name, body, sign_webhook(hook.webhook_secret, body, int(time.time())))
    assert response.status_code == 413 and not Run.objects.exists()
    assert AuditEntry.objects.filter(action="webhook.refused").count() == 1


@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=range(len(HOSTILE_BODIES)))
def test_a_correctly_signed_but_hostile_body_is_a_400_and_starts_no_run(client, hook, body):
    response = _post(client, hook.name, body, sign_webhook(hook.webhook_secret, body, int(time.time())))
    assert response.status_code == 400, response.content[:300]
    assert not Run.objects.exists()
    assert AuditEntry.objects.filter(action="webhook.refused").count() == 1


# --- events -----------------------------------------------------------------------------------

@pytest.mark.parametrize("body", HOSTILE_BODIES + [b'{"payload": {"a": NaN}}', b'{"id": {"x": 1}, "payload": {}}',
                                                   b'{"payload": ' + DEEP + b"}"], ids=range(len(HOSTILE_BODIES) + 3))
def test_a_hostile_event_body_is_a_4xx_and_changes_nothing(client, make_schedule, settings, body):
    settings.ETL_EVENT_TOKENS = ["tok"]
    make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders"})
    before = counts()
    response = client.post("/api/events/orders", data=body, content_type="application/json",
                           headers={"Authorization": "Bearer tok"})
    assert 400 <= response.status_code < 500, response.content[:300]
    assert counts() == before


# --- the dashboard's forms ---------------------------------------------------------------------

@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


@pytest.fixture
def wm(make_schedule):
    return make_schedule("wm", watermark_config={"type": "integer", "column": "id", "initial": 0})


def _posted(client, url, data):
    before = counts()
    response = client.post(url, data)
    assert response.status_code < 500, (url, data, response.status_code)
    if response.status_code >= 400:
        assert counts() == before, f"a refused form changed something: {url} {data}"
    return response


@FAST
@given(params=nasty_text | st.sampled_from(["[" * 50_000, '{"a": NaN}', '{"a": "\\u0000"}', "[]", "{", "1"]),
       reason=nasty_text)
def test_hostile_run_now_forms_are_refused_with_a_field_error(admin_client, wm, params, reason):
    response = _posted(admin_client, reverse("scheduler:schedule_run_now", args=[wm.pk]),
                       {"params": params, "reason": reason})
    if response.status_code >= 400:
        assert response.status_code == 400


@FAST
@given(value=nasty_text, reason=nasty_text, op=st.sampled_from(["set", "reset", "", "drop table"]))
def test_hostile_watermark_forms_are_refused_with_a_field_error(admin_client, wm, value, reason, op):
    _posted(admin_client, reverse("scheduler:schedule_watermark", args=[wm.pk]),
            {"value": value, "reason": reason, "op": op})


@FAST
@given(start=nasty_text, end=nasty_text, window=nasty_text, parallel=nasty_text, schedule=st.sampled_from(["wm", "x"]))
def test_hostile_backfill_forms_are_refused_with_a_field_error(admin_client, wm, start, end, window, parallel,
                                                               schedule):
    _posted(admin_client, reverse("scheduler:backfill_submit"),
            {"schedule": schedule, "range_from": start, "range_to": end, "window_size": window,
             "max_parallel": parallel, "reason": "r"})


@pytest.mark.parametrize("data", [{"range_from": "10", "range_to": "0"}, {"window_size": "0"},
                                  {"window_size": "-1"}, {"max_parallel": "-1"}, {"schedule": "nope"},
                                  {"range_to": str(10**12)}])
def test_a_bad_backfill_form_is_a_400_and_creates_nothing(admin_client, wm, data):
    form = {"schedule": "wm", "range_from": "0", "range_to": "100", "window_size": "10", "max_parallel": "1",
            "reason": "r", **data}
    response = _posted(admin_client, reverse("scheduler:backfill_submit"), form)
    assert response.status_code == 400


@pytest.mark.parametrize("url", ["scheduler:run_cancel", "scheduler:backfill_pause", "scheduler:backfill_resume",
                                 "scheduler:backfill_cancel", "scheduler:backfill_retry"])
def test_actions_on_ids_that_do_not_exist_are_404s(admin_client, url):
    before = counts()
    assert admin_client.post(reverse(url, args=[987654]), {"reason": "r"}).status_code == 404
    assert counts() == before


# --- the admin --------------------------------------------------------------------------------

ADMIN_FIELDS = {
    "trigger_config": st.sampled_from(['{"cron": "61 * * * *"}', '{"cron": "\\u0000"}', "[" * 50_000, "{",
                                       '{"cron": NaN}', "[]"]),
    "timezone": st.sampled_from(["Mars/Olympus", "UTC\x00", "", "x" * 200]),
    "params": st.sampled_from(['{"a": NaN}', '{"a": "\\u0000"}', "[" * 50_000, "[1]", "{"]),
    "watermark_config": st.sampled_from(['{"type": "float"}', '{"type": "integer", "column": "\\u0000"}',
                                         '{"type": "datetime", "max_window": 0}', "[" * 50_000]),
    "max_runs_per_minute": st.sampled_from(["-1", str(2**40), "x", "1e3"]),
    "max_wait_seconds": st.sampled_from(["-5", str(2**40), ""]),
    "target_id": st.sampled_from(["no.such", "", "demo.noop\x00"]),
    "name": st.sampled_from(["", "has space", "x" * 300, "a\x00"]),
}


@FAST
@given(field=st.sampled_from(sorted(ADMIN_FIELDS)), data=st.data())
def test_the_admin_shows_a_field_error_and_saves_nothing(admin_client, standard_class, field, data):
    from tests.views.test_admin import ADD, _form

    value = data.draw(ADMIN_FIELDS[field])
    trigger = {"trigger_kind": "cron"} if field in ("trigger_config", "timezone") else {}
    if field == "timezone":
        trigger["trigger_config"] = '{"cron": "0 * * * *"}'
    before = counts()
    response = admin_client.post(ADD, {**_form(standard_class, **trigger), field: value})
    assert response.status_code == 200, response.status_code  # the form again, with errors
    assert counts() == before and not Schedule.objects.exists()
    errors = response.context["adminform"].form.errors
    assert errors, "no error shown"
