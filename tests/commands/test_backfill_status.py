import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.services.admission.backfills import backfill_submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def backfill(make_schedule, now):
    schedule = make_schedule("marked", watermark_config={"type": "integer", "column": "id"})
    return backfill_submit(schedule=schedule, start=0, end=20, window=10, reason="replay", requested_by="olivia",
                           now=now)


def test_it_prints_progress_and_windows_as_json(backfill):
    out = StringIO()
    call_command("backfill_status", str(backfill.pk), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert (data["status"], data["reason"], data["requested_by"]) == ("ACTIVE", "replay", "olivia")
    assert data["progress"]["total"] == 2
    assert [(w["seq"], w["low"], w["high"], w["status"]) for w in data["windows"]] == [
        (0, "0", "10", "PENDING"), (1, "10", "20", "PENDING")]


def test_it_prints_a_bar_and_windows_as_text(backfill):
    out = StringIO()
    call_command("backfill_status", str(backfill.pk), "--windows", stdout=out)
    text = out.getvalue()
    assert "0/2 done, 0 failed, 0 running" in text and "#1    (10, 20]  PENDING" in text


@pytest.mark.parametrize("value", ["999", "abc"])
def test_an_unknown_or_malformed_id_exits_2(backfill, value):
    with pytest.raises(CommandError) as info:
        call_command("backfill_status", value)
    assert info.value.returncode == 2 and "backfill_id" in str(info.value)


def test_datetime_windows_print_as_the_documented_half_open_interval(make_schedule, now):
    schedule = make_schedule("dated", watermark_config={"type": "datetime", "column": "ts",
                                                        "initial": "2026-03-01T00:00:00+00:00"})
    backfill = backfill_submit(schedule=schedule, start="2026-03-01T00:00:00+00:00", end="2026-03-03T00:00:00+00:00",
                               window=86400, reason="replay", requested_by="olivia", now=now)
    out = StringIO()
    call_command("backfill_status", str(backfill.pk), "--windows", stdout=out)
    assert "#0    [2026-03-01 00:00:00 UTC, 2026-03-02 00:00:00 UTC)  PENDING" in out.getvalue()
    assert "(2026" not in out.getvalue()
