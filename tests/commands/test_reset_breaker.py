import getpass
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, BreakerStatus, Schedule

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_resets_an_open_breaker_and_prints_json(make_schedule, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")  # the actor by default, as trigger's
    schedule = make_schedule("shaky")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=4)
    out = StringIO()
    call_command("reset_breaker", "shaky", "--reason", "source fixed", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"schedule": "shaky", "before": "open", "status": "closed", "failures": 0}
    entry = AuditEntry.objects.get(action="breaker.reset")
    assert (entry.reason, entry.actor) == ("source fixed", "shelly")


def test_an_unknown_schedule_exits_2_and_changes_nothing(make_schedule):
    with pytest.raises(CommandError) as info:
        call_command("reset_breaker", "nope", "--reason", "x")
    assert info.value.returncode == 2 and "unknown schedule 'nope'" in str(info.value)
    assert not AuditEntry.objects.filter(action="breaker.reset").exists()


def test_an_empty_reason_exits_2(make_schedule):
    make_schedule("shaky")
    with pytest.raises(CommandError) as info:
        call_command("reset_breaker", "shaky", "--reason", " ")
    assert info.value.returncode == 2 and "reason" in str(info.value)
