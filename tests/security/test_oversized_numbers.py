"""An oversized number (5,000 digits) in JSON from a user: a 4xx naming the field, nothing changed (issue 22)."""
from __future__ import annotations

import json
import time

import pytest
from django.core.management import CommandError, call_command
from django.test import Client as client_raw
from django.urls import reverse

from scheduler.host import SchedulerHost
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.webhooks import sign_webhook
from tests.api.conftest import admin_token, admin_user, make_token  # noqa: F401 - fixtures
from tests.security.hostile import counts

pytestmark = pytest.mark.django_db
HUGE = "9" * 5000
PARAMS = '{"rows": ' + HUGE + "}"


def test_the_run_now_form_answers_400_naming_the_field(client, operator, make_schedule):
    client.force_login(operator)
    schedule = make_schedule("orders")
    before = counts()
    response = client.post(reverse("scheduler:schedule_run_now", args=[schedule.pk]), {"params": PARAMS})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="params-error"' in page and "rows: a number has 5000 digits; at most 100 are allowed" in page
    assert counts() == before


def test_a_webhook_body_answers_400_naming_the_field(client, make_schedule):
    hook = make_schedule("shop-hook", trigger_kind="webhook")
    body = PARAMS.encode()
    before = counts(audit=False)
    response = client.post(f"/hooks/{hook.name}", data=body, content_type="application/json",
                           headers=sign_webhook(hook.webhook_secret, body, int(time.time())))
    assert response.status_code == 400
    assert response.json()["field"] == "body.rows" and "5000 digits" in response.json()["error"]
    assert counts(audit=False) == before


def test_an_event_body_answers_400_naming_the_field(client, make_schedule, settings):
    settings.ETL_EVENT_TOKENS = ["tok"]
    make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders"})
    before = counts()
    response = client.post("/api/events/orders", data='{"payload": {"order_id": ' + HUGE + "}}",
                           content_type="application/json", headers={"Authorization": "Bearer tok"})
    assert response.status_code == 400
    assert response.json()["field"] == "body.payload.order_id" and "5000 digits" in response.json()["error"]
    assert counts() == before


def test_the_api_answers_400_naming_the_field(admin_token, make_schedule):
    make_schedule("orders")
    before = counts()
    response = client_raw().post("/api/v1/schedules/orders/runs", data='{"params": ' + PARAMS + "}",
                             content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {admin_token}")
    assert response.status_code == 400, response.content[:300]
    body = response.json()
    assert body["errors"] == [{"field": "body.params.rows",
                               "message": "a number has 5000 digits; at most 100 are allowed"}]
    assert counts() == before


@pytest.mark.parametrize("args", [["trigger", "orders", "--param", f"rows={HUGE}"],
                                  ["emit_event", "orders", "--payload", PARAMS]])
def test_commands_exit_2_naming_the_field(make_schedule, args):
    make_schedule("orders")
    make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders"})
    before = counts()
    with pytest.raises(CommandError) as info:
        call_command(*args)
    assert info.value.returncode == 2 and "rows" in str(info.value) and "5000 digits" in str(info.value)
    assert counts() == before


def test_the_facade_refuses_a_huge_python_int_naming_the_field(make_schedule):
    make_schedule("orders")
    before = counts()
    with pytest.raises(ServiceError) as info:
        SchedulerHost().trigger_manual("orders", {"rows": 10**4000}, actor="system")
    assert info.value.field == "params.rows" and "more than 100 digits" in str(info.value)
    assert counts() == before


def test_a_number_of_a_hundred_digits_is_still_data(make_schedule):
    make_schedule("orders")
    run_id = SchedulerHost().trigger_manual("orders", json.loads('{"rows": 1' + "0" * 98 + "}"), actor="system")
    assert run_id


def test_the_admin_form_shows_a_field_error(client, make_user, standard_class):
    from tests.views.test_admin import ADD, _form

    client.force_login(make_user("ada", "admin", is_staff=True))
    before = counts()
    response = client.post(ADD, {**_form(standard_class), "params": PARAMS})
    assert response.status_code == 200
    assert "rows: a number has 5000 digits" in str(response.context["adminform"].form.errors["params"])
    assert counts() == before
