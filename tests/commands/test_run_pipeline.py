import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command


def test_it_runs_a_pipeline_inline_and_prints_the_report():
    out = StringIO()
    call_command("run_pipeline", "demo.noop", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert [r["task_id"] for r in report["records"]] == ["demo.noop"]
    assert report["records"][0]["outcome"] == "SUCCESS"


def test_a_failing_pipeline_exits_1_with_the_reason():
    out = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("run_pipeline", "demo.flaky", "--param", "fail=true", stdout=out)
    assert info.value.returncode == 1
    assert "FAILED" in out.getvalue() and "failed on purpose" in out.getvalue()


def test_an_unknown_pipeline_exits_2_naming_it():
    with pytest.raises(CommandError) as info:
        call_command("run_pipeline", "no.such")
    assert info.value.returncode == 2 and "no.such" in str(info.value)
