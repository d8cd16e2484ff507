import json
from datetime import timedelta

from scheduler.core import Ledger, MemoryLedger, Outcome, RunRecord

from .fakes import T0


def test_run_record_round_trips_through_json():
    record = RunRecord("load", Outcome.SUCCESS, T0, T0 + timedelta(seconds=3), rows=4, watermark=T0)
    back = RunRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert back == record
    assert back.started_at.tzinfo is not None


def test_run_record_keeps_integer_watermarks_and_reasons():
    record = RunRecord("x", Outcome.FAILED, T0, T0, watermark=42, reason="IOError: boom")
    assert RunRecord.from_dict(record.to_dict()) == record


def test_memory_ledger_remembers_the_latest_success_only():
    ledger = MemoryLedger()
    assert isinstance(ledger, Ledger)
    first = RunRecord("t", Outcome.SUCCESS, T0, T0 + timedelta(minutes=1))
    later = RunRecord("t", Outcome.SUCCESS, T0, T0 + timedelta(minutes=5))
    failed = RunRecord("t", Outcome.FAILED, T0, T0 + timedelta(minutes=9))
    for record in (later, first, failed):
        ledger.append(record)
    assert ledger.last_success("t") is later
    assert ledger.last_success("other") is None
    assert len(ledger.for_task("t")) == 3


def test_outcome_is_a_string_enum():
    assert Outcome.SUCCESS == "SUCCESS"
    assert Outcome("FAILED") is Outcome.FAILED
