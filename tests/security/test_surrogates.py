"""A lone surrogate ("\\ud800") is no text: refused with a 4xx (exit 2, a ServiceError) naming the field at every
door, and nothing changed; one stored before the fix still renders (issue 33: on SQLite one param made /audit/ and
both audit CSV exports a 500 for every reader, for good)."""

from __future__ import annotations

import json
import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Run, Schedule
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.events import event_emit
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.admission.webhooks import sign_webhook
from tests.security.hostile import counts

pytestmark = pytest.mark.django_db
LONE = "\ud800"  # what "\ud800" in JSON becomes; a command's undecodable argument byte becomes "\udcff"
ARGV = "caf\udce9"  # b"caf\xe9" (Latin-1) in a command line, as Python decodes argv (surrogateescape)
WM = {"type": "integer", "column": "id", "initial": 0}
BACKFILL = {"schedule": "wm", "from": "0", "to": "10", "window": 5, "reason": "r"}


@pytest.fixture
def wm(make_schedule):
    return make_schedule("wm", watermark_config=WM)


@pytest.fixture
def run(wm, now):
    found = run_trigger_manual(schedule=wm, actor="tests", now=now)
    Run.objects.filter(pk=found.pk).update(status="FAILED", finished_at=now)
    return found


def _escaped(value) -> str:
    """JSON as a client sends it: the lone surrogate as the escape \\ud800 (pure ASCII on the wire)."""
    return json.dumps(value)


def _refused_over_http(response, field: str, before: dict) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert field in response.content.decode(), (field, response.content[:300])
    assert counts() == before, "a refused request changed something"


# --- the REST API ---------------------------------------------------------------------------------------------

API_DOORS = [
    ("post", "/schedules/wm/runs", {"reason": LONE}, "body.reason"),
    ("post", "/schedules/wm/runs", {"params": {"day": LONE}}, "body.params.day"),
    ("post", "/schedules/wm/runs", {"params": {LONE: 1}}, "body.params"),
    ("post", "/runs/{run}/cancel", {"reason": LONE}, "body.reason"),
    ("post", "/runs/{run}/rerun", {"reason": LONE}, "body.reason"),
    ("post", "/backfills", {**BACKFILL, "schedule": LONE}, "body.schedule"),
    ("post", "/backfills", {**BACKFILL, "reason": LONE}, "body.reason"),
    ("post", "/backfills", {**BACKFILL, "from": LONE}, "body.from"),
    ("put", "/schedules/wm/watermark", {"value": "5", "reason": LONE}, "body.reason"),
    ("put", "/schedules/wm/watermark", {"value": LONE, "reason": "r"}, "body.value"),
    ("post", "/schedules/wm/breaker/reset", {"reason": LONE}, "body.reason"),
    ("post", "/schedules", {"name": LONE, "target_id": "demo.noop"}, "body.name"),
    ("post", "/schedules", {"name": "n2", "target_id": "demo.noop", "description": LONE}, "body.description"),
    ("patch", "/schedules/wm", {"description": LONE}, "body.description"),
    ("patch", "/schedules/wm", {"trigger_config": {"cron": LONE}}, "body.trigger_config.cron"),
]


@pytest.mark.parametrize("method, path, body, field", API_DOORS, ids=[f"{m} {p} {f}" for m, p, _b, f in API_DOORS])
def test_the_api_refuses_a_lone_surrogate_naming_the_field(client, make_user, wm, run, method, path, body, field):
    from scheduler.services.access.tokens import token_create

    token = token_create(user=make_user("ada", "admin", is_staff=True), name="t").plaintext
    before = counts()
    response = getattr(client, method)(
        "/api/v1" + path.format(run=run.pk),
        _escaped(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    _refused_over_http(response, field, before)
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["errors"][0]["field"] == field


# --- events and webhooks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, field",
    [
        ({"id": LONE, "payload": {}}, "body.id"),
        ({"id": "e1", "payload": {"a": LONE}}, "body.payload.a"),
        ({"id": "e1", "payload": {}, "source": LONE}, "body.source"),
    ],
)
def test_an_event_with_a_lone_surrogate_is_a_400_naming_the_field(client, make_schedule, settings, body, field):
    settings.ETL_EVENT_TOKENS = ["tok"]
    make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders"})
    before = counts()
    response = client.post(
        "/api/events/orders", data=_escaped(body), content_type="application/json", HTTP_AUTHORIZATION="Bearer tok"
    )
    _refused_over_http(response, field, before)


def test_a_webhook_body_with_a_lone_surrogate_is_a_400_naming_the_field(client, make_schedule):
    hook = make_schedule("shop-hook", trigger_kind="webhook")
    body = _escaped({"order": {"note": LONE}}).encode()
    before = counts(audit=False)
    response = client.post(
        f"/hooks/{hook.name}",
        data=body,
        content_type="application/json",
        headers=sign_webhook(hook.webhook_secret, body, int(time.time())),
    )
    assert response.status_code == 400 and "body.order.note" in response.content.decode()
    assert counts(audit=False) == before and not Run.objects.exists()


# --- the pages' forms and the admin ----------------------------------------------------------------------------


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def test_the_run_now_form_refuses_params_with_a_lone_surrogate(admin_client, wm):
    before = counts()
    response = admin_client.post(
        reverse("scheduler:schedule_run_now", args=[wm.pk]), {"params": '{"day": "\\ud800"}', "reason": "r"}
    )
    _refused_over_http(response, "params", before)
    assert "lone surrogate" in response.content.decode()


def test_the_admin_refuses_json_fields_with_a_lone_surrogate(admin_client, standard_class):
    from tests.views.test_admin import ADD, _form

    for field, value in (("params", '{"day": "\\ud800"}'), ("trigger_config", '{"cron": "\\ud800"}')):
        before = counts()
        response = admin_client.post(ADD, {**_form(standard_class), field: value})
        assert response.status_code == 200 and counts() == before
        assert field in response.context["adminform"].form.errors, field


def test_a_form_cannot_even_carry_one(admin_client, wm):
    """Form fields are decoded from UTF-8 with replacement: the bytes of a surrogate arrive as U+FFFD, never as one."""
    url = reverse("scheduler:schedule_run_now", args=[wm.pk])
    response = admin_client.post(
        url, data="params=%7B%7D&reason=%ED%A0%80", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 302
    assert AuditEntry.objects.get(action="run.trigger").reason == "\ufffd\ufffd\ufffd"


# --- the management commands (argv is decoded with surrogateescape: an undecodable byte is a lone surrogate) ----


def refused_command(*args, field: str) -> None:
    before = counts()
    err = StringIO()
    with pytest.raises(CommandError) as info:
        call_command(*args, stdout=StringIO(), stderr=err)
    said = str(info.value) + err.getvalue()  # a schedules file lists its problems on stderr
    assert info.value.returncode == 2, (info.value.returncode, said)
    assert field in said and "surrogate" in said, said
    assert counts() == before, "a refused command changed something"


@pytest.mark.parametrize(
    "args, field",
    [
        (["trigger", "wm", "--param", f"day={ARGV}"], "day"),
        (["trigger", "wm", "--param", 'day="\\ud800"'], "day"),
        (["trigger", ARGV], "schedule"),
        (["trigger", "wm", "--actor", ARGV], "actor"),
        (["emit_event", "orders", "--id", ARGV], "id"),
        (["emit_event", "orders", "--payload", '{"a": "\\ud800"}'], "payload"),
        (["backfill", ARGV, "--from", "0", "--to", "10", "--window", "5", "--reason", "r"], "schedule"),
        (["backfill", "wm", "--from", "0", "--to", "10", "--window", "5", "--reason", ARGV], "reason"),
        (["backfill", "wm", "--from", ARGV, "--to", "10", "--window", "5", "--reason", "r"], "from"),
        (["watermark", "wm", "--set", "5", "--reason", ARGV], "reason"),
        (["watermark", "wm", "--set", ARGV, "--reason", "r"], "value"),
        (["reset_breaker", "wm", "--reason", ARGV], "reason"),
        (["rotate_webhook_secret", "hook", "--reason", ARGV], "reason"),
        (["team", "create", ARGV], "name"),
        (["team", "update", "default", "--description", ARGV], "description"),
        (["event_token", "create", "--name", ARGV, "--all-teams"], "name"),
    ],
)
def test_a_command_refuses_a_lone_surrogate_with_exit_2_naming_the_field(wm, make_schedule, args, field):
    make_schedule("hook", trigger_kind="webhook")
    refused_command(*args, field=field)


def test_cancel_refuses_a_reason_with_a_lone_surrogate(wm, now):
    queued = run_trigger_manual(schedule=wm, actor="tests", now=now)
    refused_command("cancel_run", str(queued.pk), "--reason", ARGV, field="reason")
    queued.refresh_from_db()
    assert queued.status == "QUEUED"


def test_a_schedules_file_with_a_lone_surrogate_is_refused(standard_class, tmp_path):
    path = tmp_path / "schedules.yaml"
    path.write_text('schedules:\n  - name: s1\n    target_id: demo.noop\n    description: "\\ud800"\n')
    refused_command("apply_schedules", str(path), field="description")


# --- the services and the Python facade -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda wm: run_trigger_manual(schedule=wm, actor="tests", reason=LONE), "reason"),
        (lambda wm: run_trigger_manual(schedule=wm, actor="tests", params={"day": LONE}), "params"),
        (lambda wm: run_trigger_manual(schedule=wm, actor=LONE), "actor"),
        (lambda wm: event_emit(topic="orders", payload={}, event_id=LONE, source="t", actor="tests"), "id"),
        (lambda wm: event_emit(topic="orders", payload={LONE: 1}, event_id="e", source="t", actor="tests"), "payload"),
        (
            lambda wm: backfill_submit(schedule=LONE, start="0", end="10", window="5", reason="r", requested_by="t"),
            "schedule",
        ),
        (
            lambda wm: backfill_submit(schedule=wm, start="0", end="10", window="5", reason=LONE, requested_by="t"),
            "reason",
        ),
        (
            lambda wm: schedule_save(data={"name": "n", "target_id": "demo.noop", "description": LONE}, actor="t"),
            "description",
        ),
        (lambda wm: SchedulerHost().trigger_manual("wm", {"day": LONE}), "params"),
        (lambda wm: SchedulerHost().trigger_manual(LONE), "schedule"),
        (lambda wm: SchedulerHost().watermarks.set("wm", 5, reason=LONE), "reason"),
    ],
)
def test_the_services_refuse_a_lone_surrogate_naming_the_field(wm, call, field):
    before = counts()
    with pytest.raises(ServiceError) as info:
        call(wm)
    assert (info.value.field or "").split(".")[0] == field, (info.value.field, str(info.value))
    assert "surrogate" in str(info.value) and counts() == before


# --- one stored before the fix still renders (SQLite kept it, escaped, in a JSON column) -------------------------


def test_a_lone_surrogate_stored_before_still_renders_everywhere(admin_client, make_user, wm, now):
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL never stored one: jsonb refuses \\ud800, so there is nothing from before to render")
    run = run_trigger_manual(schedule=wm, actor="tests", now=now)
    Run.objects.filter(pk=run.pk).update(params={"day": LONE, LONE: 1})
    entry = AuditEntry.objects.create(
        actor="tests",
        action="run.trigger",
        target_type="run",
        target_id=str(run.pk),
        target_repr="run",
        after={"params": {"day": LONE}},
        at=now,
    )
    from scheduler.services.access.tokens import token_create

    bearer = {"HTTP_AUTHORIZATION": "Bearer " + token_create(user=make_user("ci", "admin"), name="t").plaintext}
    pages = [
        (reverse("scheduler:audit"), {}),
        (reverse("scheduler:audit_csv"), {}),
        (reverse("scheduler:run_detail", args=[run.pk]), {}),
        ("/api/v1/audit", bearer),
        ("/api/v1/audit/export?format=csv", bearer),
        ("/api/v1/audit/export?format=jsonl", bearer),
        (f"/api/v1/runs/{run.pk}", bearer),
        (f"/admin/scheduler/auditentry/{entry.pk}/change/", {}),
        (f"/admin/scheduler/run/{run.pk}/change/", {}),
        (f"/admin/scheduler/schedule/{wm.pk}/change/", {}),
    ]
    Schedule.objects.filter(pk=wm.pk).update(params={"day": LONE})
    for url, extra in pages:
        response = admin_client.get(url, **extra)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        text = body.decode("utf-8")  # whole UTF-8: the surrogate shown as the text \ud800
        assert "\\ud800" in text or "\\\\ud800" in text, (url, text[:300])
