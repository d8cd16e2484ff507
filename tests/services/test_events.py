"""Events: stored, deduplicated by (topic, id), one run per matching schedule with the payload as params."""
from __future__ import annotations

import pytest

from scheduler.models import AuditEntry, Event, Run
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.events import event_emit

pytestmark = pytest.mark.django_db


@pytest.fixture
def subscribers(make_schedule):
    return {
        "confirmed": make_schedule("on-confirmed", trigger_kind="event", params={"region": "eu"},
                                   trigger_config={"topic": "orders", "filter": "status == 'confirmed'"}),
        "big": make_schedule("on-big", trigger_kind="event",
                             trigger_config={"topic": "orders", "filter": "amount > 100 && country in ['DE','FR']"}),
        "all": make_schedule("on-any-order", trigger_kind="event", trigger_config={"topic": "orders"}),
        "other": make_schedule("on-refund", trigger_kind="event", trigger_config={"topic": "refunds"}),
    }


def test_each_matching_schedule_gets_one_run_with_the_payload_as_params(subscribers, now):
    event, runs = event_emit(topic="orders", payload={"status": "confirmed", "amount": 50, "country": "DE"},
                             event_id="o-1", source="tests", actor="tests", now=now)
    assert event.pk and event.topic == "orders" and event.event_id == "o-1" and event.matched == 2
    assert {r.schedule.name for r in runs} == {"on-confirmed", "on-any-order"}
    by_name = {r.schedule.name: r for r in runs}
    assert by_name["on-confirmed"].params == {"region": "eu", "status": "confirmed", "amount": 50, "country": "DE"}
    assert all(r.trigger_key == f"event:{event.pk}" and r.trigger_kind == "event" and r.event_id == event.pk
               for r in runs)
    assert Event.objects.get(pk=event.pk).payload["amount"] == 50
    assert AuditEntry.objects.filter(action="event.receive", target_id=str(event.pk)).exists()


def test_a_repeated_event_id_returns_the_stored_event_and_starts_nothing(subscribers, now):
    first, runs = event_emit(
        topic="orders", payload={"status": "confirmed"}, event_id="o-2", source="t", actor="t", now=now
    )
    again, more = event_emit(topic="orders", payload={"status": "confirmed", "x": 1}, event_id="o-2", source="t",
                             actor="t", now=now)
    assert again.pk == first.pk and again.duplicate and not first.duplicate
    assert more == [] and len(runs) == 2
    assert Run.objects.count() == 2 and Event.objects.count() == 1


def test_the_same_id_on_another_topic_is_another_event(subscribers, now):
    event_emit(topic="orders", payload={}, event_id="same", source="t", actor="t", now=now)
    other, runs = event_emit(topic="refunds", payload={}, event_id="same", source="t", actor="t", now=now)
    assert not other.duplicate and [r.schedule.name for r in runs] == ["on-refund"]


def test_disabled_schedules_and_filters_that_cannot_judge_start_nothing(subscribers, now):
    from scheduler.services.definitions.schedules import schedule_set_enabled

    schedule_set_enabled(schedule=subscribers["all"], enabled=False, actor="tests")
    event, runs = event_emit(topic="orders", payload={"amount": "lots"}, source="t", actor="t", now=now)
    assert runs == [] and event.matched == 0 and Event.objects.filter(pk=event.pk).exists()


def test_an_event_without_an_id_gets_one(subscribers, now):
    a, _ = event_emit(topic="orders", payload={}, source="t", actor="t", now=now)
    b, _ = event_emit(topic="orders", payload={}, source="t", actor="t", now=now)
    assert a.event_id and b.event_id and a.event_id != b.event_id


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"topic": "bad topic"}, "topic"),
        ({"topic": ""}, "topic"),
        ({"topic": None}, "topic"),
        ({"payload": [1, 2]}, "payload"),
        ({"payload": "text"}, "payload"),
        ({"event_id": ""}, "id"),
        ({"event_id": {"a": 1}}, "id"),
        ({"event_id": True}, "id"),
        ({"event_id": "x" * 201}, "id"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(subscribers, now, kwargs, field):
    args = {"topic": "orders", "payload": {}, "source": "t", "actor": "t", "now": now, **kwargs}
    with pytest.raises(ServiceError) as exc:
        event_emit(**args)
    assert exc.value.field == field
    assert not Event.objects.exists() and not Run.objects.exists()


def test_an_oversized_payload_is_refused(subscribers, now, settings):
    settings.ETL_WEBHOOK_MAX_BYTES = 100
    with pytest.raises(ServiceError) as exc:
        event_emit(topic="orders", payload={"blob": "x" * 200}, source="t", actor="t", now=now)
    assert exc.value.field == "payload" and not Event.objects.exists()


def test_a_bad_filter_is_refused_on_save_with_the_parse_error(make_schedule):
    with pytest.raises(ServiceError) as exc:
        make_schedule("broken", trigger_kind="event", trigger_config={"topic": "orders", "filter": "status = 'x'"})
    assert exc.value.field == "trigger_config.filter"
    assert "does not parse at line 1, column" in str(exc.value)


def test_a_nul_character_is_refused_naming_the_payload(subscribers, now):
    # PostgreSQL's jsonb cannot store it; the caller gets a field error instead of a 500
    for payload in ({"a": "x\x00y"}, {"k\x00": 1}, {"l": ["\x00"]}):
        with pytest.raises(ServiceError) as exc:
            event_emit(topic="orders", payload=payload, source="t", actor="t", now=now)
        assert exc.value.field == "payload" and "NUL" in str(exc.value)
    assert not Event.objects.exists()
