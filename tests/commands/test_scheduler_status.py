import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from scheduler.models import GovernanceTick
from scheduler.services.common.leases import lease_acquire
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db


def test_json_shows_queue_per_class_leases_and_the_last_tick(make_schedule):
    schedule = make_schedule("s1")
    run_trigger_manual(schedule=schedule, actor="tests")
    lease_acquire(name="dispatch", holder="c1@host", ttl=30, now=timezone.now())
    GovernanceTick.objects.create(started_at=timezone.now(), holder="c1@host")
    out = StringIO()
    call_command("scheduler_status", "--json", stdout=out)
    data = json.loads(out.getvalue())
    standard = next(q for q in data["queue"] if q["name"] == "standard")
    assert standard["queued"] == 1 and standard["running"] == 0
    assert data["leases"][0]["holder"] == "c1@host" and data["leases"][0]["live"] is True
    assert data["governance"]["late"] is False


def test_text_output_warns_when_no_governance_tick_ran(make_schedule):
    out = StringIO()
    call_command("scheduler_status", stdout=out)
    assert "no tick yet" in out.getvalue()
