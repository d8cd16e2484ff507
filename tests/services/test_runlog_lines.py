"""The run log's cap counts lines as well as bytes: an empty line costs its row (issue 33)."""

from __future__ import annotations

import logging
import sys

import pytest

from scheduler.models import Run, RunLogLine, RunStatus, WorkloadClass
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.logs import RunLogCapture
from scheduler.services.runs.queue import run_trigger_manual

pytestmark = pytest.mark.django_db


def test_a_command_writing_300000_empty_lines_stores_at_most_the_line_cap(make_schedule, now, settings,
                                                                         no_beat_during_the_run):
    """The probe's attack: 300,000 empty lines (0 bytes each) stored 678,816 rows for one run."""
    assert settings.ETL_RUN_LOG_MAX_LINES == 10_000
    code = "import sys; sys.stdout.write('\\n' * 300_000); sys.stderr.write('\\n' * 1000)"
    schedule = make_schedule(
        "empties", target_kind="command", target_id="", command={"argv": [sys.executable, "-c", code]}
    )
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.reason
    stored = RunLogLine.objects.filter(run=run).count()
    assert stored <= 10_000 + 3  # the cap, plus the forced closing notes
    last = RunLogLine.objects.filter(run=run).order_by("-seq").first()
    assert last.message.startswith("log cap of 10000 lines reached:") and last.level == "WARNING"
    output = RunLogLine.objects.filter(run=run, source__in=["stdout", "stderr"]).count()
    dropped = int(last.message.split(": ")[1].split()[0])
    assert 0 <= dropped - (301_000 - output) <= 5  # every output line not kept is counted (and a note or two)


def _capture(run_id, **caps):
    return RunLogCapture(run_id, max_line=1000, level=logging.INFO, **{"max_bytes": 10_000, **caps})


def test_lines_past_the_line_cap_are_counted_not_kept_and_the_closing_notes_always_are(make_schedule, now):
    run = Run.objects.create(
        schedule=make_schedule("s"),
        trigger_key="k",
        trigger_kind="manual",
        queued_at=now,
        workload_class=WorkloadClass.objects.get(name="standard"),
        status=RunStatus.RUNNING,
    )
    capture = _capture(run.pk, max_lines=5)
    for _ in range(8):
        capture.add("", level="INFO", source="stdout", at=now)
    capture.close_notes(None)
    capture.save()
    messages = list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("message", flat=True))
    assert messages == [""] * 5 + ["log cap of 5 lines reached: 3 later line(s) not kept"]


def test_the_byte_cap_still_says_bytes_when_it_is_the_one_met(make_schedule, now):
    run = Run.objects.create(
        schedule=make_schedule("s"),
        trigger_key="k",
        trigger_kind="manual",
        queued_at=now,
        workload_class=WorkloadClass.objects.get(name="standard"),
        status=RunStatus.RUNNING,
    )
    capture = _capture(run.pk, max_bytes=1024, max_lines=100)
    for _ in range(3):
        capture.add("x" * 500, level="INFO", source="stdout", at=now)
    capture.close_notes(None)
    assert capture.take()[-1].message == "log cap of 1024 bytes reached: 1 later line(s) not kept"
