"""HTTP: POST /hooks/<schedule> and POST /api/events/<topic>, JSON errors on every refusal."""
from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from scheduler.models import AuditEntry, Event, Run
from scheduler.services.admission.webhooks import sign_webhook

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(make_schedule):
    return make_schedule("shop-hook", trigger_kind="webhook")


def _post_hook(client, schedule, body: bytes, *, secret=None, ts=None, content_type="application/json", headers=None):
    signed = sign_webhook(secret or schedule.webhook_secret, body, ts if ts is not None else int(time.time()))
    return client.post(
        f"/hooks/{schedule.name}", data=body, content_type=content_type, headers={**signed, **(headers or {})}
    )


def test_a_signed_webhook_answers_202_with_the_run(client, hook):
    response = _post_hook(client, hook, b'{"order": 7}')
    assert response.status_code == 202
    run = Run.objects.get(pk=response.json()["run"])
    assert run.params == {"order": 7} and run.schedule == hook


def test_a_wrong_signature_is_a_json_401_with_an_audit_entry_and_no_run(client, hook):
    response = _post_hook(client, hook, b"{}", secret="wrong")
    assert response.status_code == 401
    assert "signature does not match" in response.json()["error"]
    assert AuditEntry.objects.filter(action="webhook.refused").count() == 1 and not Run.objects.exists()


def test_a_replay_over_http_is_a_409(client, hook):
    ts = int(time.time())
    assert _post_hook(client, hook, b"{}", ts=ts).status_code == 202
    again = _post_hook(client, hook, b"{}", ts=ts)
    assert again.status_code == 409 and "already received" in again.json()["error"]


def test_an_oversized_body_is_a_413_before_it_is_read(client, hook, settings):
    settings.ETL_WEBHOOK_MAX_BYTES = 10
    response = _post_hook(client, hook, b'{"x": "0123456789"}')
    assert response.status_code == 413 and "larger than 10 bytes" in response.json()["error"]
    assert AuditEntry.objects.filter(action="webhook.refused", reason__contains="larger").exists()


def test_a_wrong_content_type_is_a_415(client, hook):
    response = _post_hook(client, hook, b"a=1", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415 and "application/json" in response.json()["error"]


def test_get_is_a_json_405(client, hook):
    response = client.get(f"/hooks/{hook.name}")
    assert response.status_code == 405 and response["Allow"] == "POST" and "use POST" in response.json()["error"]


def test_an_unknown_schedule_answers_exactly_like_a_bad_signature(client, hook):
    unknown = client.post("/hooks/ghost", data=b"{}", content_type="application/json",
                          headers=sign_webhook("x", b"{}", int(time.time())))
    bad = _post_hook(client, hook, b"{}", secret="wrong")
    assert unknown.status_code == bad.status_code == 401
    assert unknown.content == bad.content and "ghost" not in unknown.content.decode()


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300), headers=st.dictionaries(
    st.sampled_from(["X-Etl-Timestamp", "X-Etl-Signature", "Content-Type"]), st.text(
        alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=70), max_size=3))
def test_hostile_webhook_requests_get_a_json_4xx(client, hook, body, headers):
    content_type = headers.pop("Content-Type", "application/json")
    response = client.post(f"/hooks/{hook.name}", data=body, content_type=content_type, headers=headers)
    assert 400 <= response.status_code < 500
    assert "error" in response.json()
    assert not Run.objects.exists()


# --- events -------------------------------------------------------------------

@pytest.fixture
def on_order(make_schedule, settings):
    settings.ETL_EVENT_TOKENS = ["tok-1", "tok-2"]
    return make_schedule("on-order", trigger_kind="event",
                         trigger_config={"topic": "orders", "filter": "status == 'confirmed'"})


def _post_event(client, topic, data, *, token="tok-2", raw=None, content_type="application/json"):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = raw if raw is not None else json.dumps(data)
    return client.post(f"/api/events/{topic}", data=body, content_type=content_type, headers=headers)


def test_an_event_with_a_token_starts_the_matching_schedule(client, on_order):
    response = _post_event(client, "orders", {"id": "e-1", "payload": {"status": "confirmed"}})
    assert response.status_code == 202
    data = response.json()
    assert data["event_id"] == "e-1" and not data["duplicate"]
    assert Run.objects.get(pk=data["runs"][0]).params == {"status": "confirmed"}


def test_a_plain_object_is_the_payload(client, on_order):
    response = _post_event(client, "orders", {"status": "confirmed", "id": 5})
    assert response.status_code == 202
    assert Event.objects.get().payload == {"status": "confirmed", "id": 5}


def test_a_repeated_event_id_is_a_200_duplicate_without_a_run(client, on_order):
    _post_event(client, "orders", {"id": "e-9", "payload": {"status": "confirmed"}})
    again = _post_event(client, "orders", {"id": "e-9", "payload": {"status": "confirmed"}})
    assert again.status_code == 200 and again.json()["duplicate"] is True and again.json()["runs"] == []
    assert Run.objects.count() == 1


@pytest.mark.parametrize("token, status", [(None, 401), ("nope", 401), ("", 401)])
def test_an_event_without_a_good_token_is_refused(client, on_order, token, status):
    response = _post_event(client, "orders", {"status": "confirmed"}, token=token)
    assert response.status_code == status and "error" in response.json()
    assert not Event.objects.exists()


def test_a_basic_auth_header_is_refused_clearly(client, on_order):
    response = client.post("/api/events/orders", data="{}", content_type="application/json",
                           headers={"Authorization": "Basic dTpw"})
    assert response.status_code == 401 and "Bearer" in response.json()["error"]


def test_a_session_user_needs_the_trigger_permission(client, on_order, operator, viewer):
    client.force_login(viewer)
    assert _post_event(client, "orders", {"status": "confirmed"}, token=None).status_code == 403
    client.force_login(operator)
    assert _post_event(client, "orders", {"status": "confirmed"}, token=None).status_code == 202
    assert Event.objects.get().source == "http user:olivia"


@pytest.mark.parametrize(
    "raw, status, text",
    [("{oops", 400, "not valid JSON"), ("[1]", 400, "JSON object"), ('{"payload": [1]}', 400, "payload")],
)
def test_a_malformed_event_body_is_a_400(client, on_order, raw, status, text):
    response = _post_event(client, "orders", None, raw=raw)
    assert response.status_code == status and text in response.json()["error"]


def test_a_bad_topic_is_a_400_naming_it(client, on_order):
    response = _post_event(client, "bad..topic!", {"a": 1})
    assert response.status_code == 400 and response.json()["field"] == "topic"


def test_an_event_needs_json_and_fits_the_size_limit(client, on_order, settings):
    assert _post_event(client, "orders", None, raw="a=1", content_type="text/plain").status_code == 415
    settings.ETL_WEBHOOK_MAX_BYTES = 20
    assert _post_event(client, "orders", {"blob": "x" * 50}).status_code == 413


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.one_of(
        st.text(max_size=200),
        st.builds(
            json.dumps,
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                max_leaves=8,
            ),
        ),
    )
)
def test_hostile_event_bodies_get_json_answers_and_never_a_500(client, on_order, raw):
    response = _post_event(client, "orders", None, raw=raw)
    assert response.status_code in (200, 202) or 400 <= response.status_code < 500
    assert response.json()


# --- nested too deep, chunked ---------------------------------------------------

def _deep(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [65, 900, 5000, 100_000])
def test_a_deeply_nested_event_is_a_json_400_naming_the_field(client, on_order, depth):
    response = _post_event(client, "orders", None, raw=_deep(depth))
    assert response.status_code == 400 and "nested" in response.json()["error"]
    assert not Event.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize("depth", [65, 900, 5000, 100_000])
def test_a_deeply_nested_signed_webhook_is_a_json_400(client, hook, depth):
    response = _post_hook(client, hook, _deep(depth).encode())
    assert response.status_code == 400 and "nested" in response.json()["error"]
    assert response.json()["field"] == "body" and not Run.objects.exists()


def test_json_nested_64_levels_is_still_accepted(client, on_order):
    response = _post_event(client, "orders", None, raw=_deep(63))
    assert response.status_code == 202


def test_a_chunked_body_is_refused_with_411_not_read_as_empty(client, hook, on_order):
    body = b'{"order": 7}'
    response = _post_hook(client, hook, body, headers={"Transfer-Encoding": "chunked"})
    assert response.status_code == 411 and response.json()["field"] == "Content-Length"
    event = client.post("/api/events/orders", data=body, content_type="application/json",
                        headers={"Authorization": "Bearer tok-1", "Transfer-Encoding": "chunked"})
    assert event.status_code == 411
    assert not Run.objects.exists() and not Event.objects.exists()


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer"])
def test_the_event_endpoint_takes_the_bearer_scheme_in_any_case(client, on_order, scheme):
    response = client.post("/api/events/orders", data='{"status": "confirmed"}', content_type="application/json",
                           headers={"Authorization": f"{scheme} tok-1"})
    assert response.status_code == 202
