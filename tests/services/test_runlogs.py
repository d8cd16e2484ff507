"""Each run keeps its own log: the pipeline's logging, the scheduler's notes, a cap, tracebacks."""
from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.test import override_settings

from scheduler.core import IdentityTransform, Pipeline
from scheduler.models import Run, RunLogLine, RunStatus
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.runs import logs as runlogs
from scheduler.services.runs.logs import RunLogCapture, run_log_capture
from scheduler.services.runs.queue import run_trigger_manual
from tests.services.semantics_helpers import tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
pipeline_log = logging.getLogger("tests.pipeline")


class ChattySource:
    """Logs like a real source; fails the first `fail` extracts; `lines` extra lines per extract."""

    def __init__(self, *, fail: int = 0, lines: int = 0, permanent: bool = False):
        self.fail, self.lines, self.permanent, self.calls = fail, lines, permanent, 0

    def extract(self):
        self.calls += 1
        pipeline_log.info("connecting to the source (call %d)", self.calls)
        for i in range(self.lines):
            pipeline_log.info("line %05d %s", i, "x" * 80)
        if self.calls <= self.fail:
            raise ConnectionError("source refused the connection")
        return [{"id": 1}, {"id": 2}]

    def __repr__(self):
        return "ChattySource()"


@pytest.fixture
def chatty():
    def register(**options):
        def factory(ctx):
            return Pipeline(ChattySource(**options), IdentityTransform(), NoopSink(),
                            sleep=lambda seconds: None)  # the schedule's retry policy applies

        registry.register_pipeline("test.chatty", factory, replace=True)

    yield register
    registry._pipelines.pop("test.chatty", None)


def WC():
    from scheduler.models import WorkloadClass

    return WorkloadClass.objects.get(name="standard")


def _lines(run) -> list[RunLogLine]:
    return list(RunLogLine.objects.filter(run=run).order_by("seq"))


def _text(run) -> str:
    return "\n".join(f"{line.level} {line.source}: {line.message}" for line in _lines(run))


def test_a_run_keeps_the_pipelines_logging_and_the_schedulers_own_lines_in_order(make_schedule, chatty, now):
    chatty(fail=1)
    schedule = make_schedule("chatty", target_id="test.chatty")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    lines = _lines(run)
    assert [line.seq for line in lines] == list(range(1, len(lines) + 1))
    text = _text(run)
    assert lines[0].source == "scheduler" and "started on" in lines[0].message
    assert "attempt 1 of 3" in lines[0].message and "admitted" in lines[0].message
    assert "INFO tests.pipeline: connecting to the source (call 1)" in text
    assert "extract attempt 1 of 3 failed (ConnectionError: source refused the connection); retry in 1.0 s" in text
    assert "connecting to the source (call 2)" in text
    assert "loaded 2 row(s)" in text
    assert lines[-1].source == "scheduler" and lines[-1].message.startswith("finished SUCCEEDED")
    assert "2 rows" in lines[-1].message


def test_a_failed_run_keeps_its_traceback_in_the_log_and_in_the_error(make_schedule, chatty, now):
    chatty(fail=5)
    schedule = make_schedule("chatty", target_id="test.chatty")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "Traceback (most recent call last)" in run.error
    errors = [line for line in _lines(run) if line.level == "ERROR"]
    assert any("Traceback (most recent call last)" in e.message and "ConnectionError" in e.message for e in errors)
    assert errors[-1].message.startswith("finished FAILED")


@override_settings(ETL_RUN_LOG_MAX_BYTES=4096)
def test_the_log_is_capped_and_says_how_many_lines_it_did_not_keep(make_schedule, chatty, now):
    chatty(lines=200)
    schedule = make_schedule("chatty", target_id="test.chatty")
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    tick_and_execute(now)
    lines = _lines(run)
    kept = sum(len(line.message.encode()) for line in lines[:-2])
    assert kept <= 4096
    assert "log cap of 4096 bytes reached" in lines[-1].message
    assert lines[-1].level == "WARNING"
    assert lines[-2].message.startswith("finished SUCCEEDED")  # the outcome is never the line that is dropped


def test_only_the_worker_threads_records_are_captured(make_schedule, now):
    run = Run.objects.create(
        schedule=make_schedule("s"), trigger_key="k", trigger_kind="manual", workload_class=WC(),
        queued_at=now, status=RunStatus.RUNNING,
    )
    with run_log_capture(run) as capture:
        pipeline_log.warning("from the worker")
        other = threading.Thread(target=lambda: pipeline_log.warning("from another thread"))
        other.start()
        other.join()
        capture.note("a note")
    messages = [line.message for line in _lines(run)]
    assert "from the worker" in messages and "a note" in messages
    assert "from another thread" not in messages


def test_info_lines_are_kept_even_when_the_root_logger_says_warning(make_schedule, now):
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.WARNING)
    run = Run.objects.create(
        schedule=make_schedule("s"), trigger_key="k", trigger_kind="manual", workload_class=WC(),
        queued_at=now, status=RunStatus.RUNNING,
    )
    try:
        with run_log_capture(run):
            logging.getLogger("some.library").info("an info line")
        assert root.level == logging.WARNING  # restored
    finally:
        root.setLevel(old)
    assert "an info line" in [line.message for line in _lines(run)]


def test_a_failed_save_keeps_the_lines_for_the_next_one(make_schedule, now, monkeypatch):
    run = Run.objects.create(
        schedule=make_schedule("s"), trigger_key="k", trigger_kind="manual", workload_class=WC(),
        queued_at=now, status=RunStatus.RUNNING,
    )
    capture = RunLogCapture(run.pk, max_bytes=10_000, max_line=1000, level=logging.INFO, clock=lambda: now)
    capture.note("one")
    real = runlogs.insert_lines

    def broken(*args, **kwargs):
        raise RuntimeError("database blip")

    monkeypatch.setattr(runlogs, "insert_lines", broken)
    with pytest.raises(RuntimeError):
        capture.save()
    monkeypatch.setattr(runlogs, "insert_lines", real)
    capture.note("two")
    assert capture.save() == 2
    assert [line.message for line in _lines(run)] == ["one", "two"]


def test_long_lines_are_cut_and_nul_characters_are_stored_safely(make_schedule, now):
    run = Run.objects.create(
        schedule=make_schedule("s"), trigger_key="k", trigger_kind="manual", workload_class=WC(),
        queued_at=now - timedelta(seconds=1), status=RunStatus.RUNNING,
    )
    capture = RunLogCapture(run.pk, max_bytes=100_000, max_line=300, level=logging.INFO, clock=lambda: now)
    capture.note("y" * 1000)
    capture.note("nul\x00here")
    capture.save()
    first, second = _lines(run)
    assert first.message.startswith("y" * 300) and "700 characters cut" in first.message
    assert second.message == "nul\\x00here"


def test_a_runs_end_writes_its_closing_note_from_the_end_it_wrote_not_from_a_read(make_schedule, chatty, now,
                                                                                   monkeypatch):
    chatty()
    run = run_trigger_manual(schedule=make_schedule("s", target_id="test.chatty"), actor="tests", now=now)
    reads = []
    real = RunLogCapture.close_notes
    monkeypatch.setattr(RunLogCapture, "close_notes", lambda self, row: (reads.append(row), real(self, row))[1])
    tick_and_execute(now)
    run.refresh_from_db()
    assert reads == [{"status": RunStatus.SUCCEEDED, "rows_loaded": 2, "reason": "", "watermark_after": "",
                      "started_at": run.started_at, "finished_at": run.finished_at}]
    assert _lines(run)[-1].message == "finished SUCCEEDED, after 0.0 s, 2 rows"


def test_a_log_that_cannot_be_saved_with_the_end_is_saved_after_and_the_end_stands(make_schedule, chatty, now,
                                                                                 monkeypatch):
    chatty()
    run = run_trigger_manual(schedule=make_schedule("s", target_id="test.chatty"), actor="tests", now=now)
    real, calls = runlogs.insert_lines, []

    def first_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database blip")
        return real(*args, **kwargs)

    monkeypatch.setattr(runlogs, "insert_lines", first_fails)
    tick_and_execute(now)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and len(calls) == 2
    assert [line.message for line in _lines(run)][-1] == "finished SUCCEEDED, after 0.0 s, 2 rows"
