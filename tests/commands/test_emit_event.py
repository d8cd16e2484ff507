import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import Event, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def subscriber(make_schedule):
    return make_schedule("on-order", trigger_kind="event", trigger_config={"topic": "orders", "filter": "amount > 100"})


def test_it_emits_an_event_and_reports_the_runs_as_json(subscriber):
    out = StringIO()
    call_command("emit_event", "orders", "--payload", '{"amount": 150}', "--id", "o-1", "--actor", "alice", "--json",
                 stdout=out)
    data = json.loads(out.getvalue())
    run = Run.objects.get(pk=data["runs"][0]["run"])
    assert data["event_id"] == "o-1" and data["duplicate"] is False and data["runs"][0]["schedule"] == "on-order"
    assert run.params == {"amount": 150}
    assert Event.objects.get().source == "command alice"


def test_a_repeated_id_says_so_and_starts_nothing(subscriber):
    call_command("emit_event", "orders", "--payload", '{"amount": 150}', "--id", "o-1", stdout=StringIO())
    out = StringIO()
    call_command("emit_event", "orders", "--payload", '{"amount": 150}', "--id", "o-1", stdout=out)
    assert "already received" in out.getvalue() and Run.objects.count() == 1


def test_a_non_matching_event_is_stored_without_runs(subscriber):
    out = StringIO()
    call_command("emit_event", "orders", "--payload", '{"amount": 5}', stdout=out)
    assert "no matching schedule" in out.getvalue() and Event.objects.count() == 1 and not Run.objects.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["orders", "--payload", "{bad"], "--payload: not valid JSON"),
        (["orders", "--payload", "[1]"], "--payload: must be a JSON object"),
        (["bad topic", "--payload", "{}"], "topic"),
        (["orders", "--id", "x" * 300], "id"),
    ],
)
def test_bad_input_exits_2_and_stores_nothing(subscriber, args, message):
    with pytest.raises(CommandError) as info:
        call_command("emit_event", *args)
    assert info.value.returncode == 2 and message in str(info.value)
    assert not Event.objects.exists()
