"""Two attempts of one run write into the same log (a re-queued lost run, a fenced worker's late lines).

Found by the fencing test (tests/reliability/test_fencing.py): every capture numbered its lines from 1, and the
(run, seq) key with ON CONFLICT DO NOTHING dropped whichever attempt's lines came second. Each attempt now
numbers its lines in a range of its own (services/runlogs.py, ATTEMPT_SEQ_SPAN).
"""
from __future__ import annotations

import logging

import pytest

from scheduler.models import RunLogLine
from scheduler.services.runs.logs import RunLogCapture
from scheduler.services.runs.queue import run_trigger_manual


def _attempt(run_id: int, attempt: int, *lines: str) -> None:
    """One attempt's capture saves its lines."""
    capture = RunLogCapture(run_id, max_bytes=64 * 1024, max_line=1000, level=logging.INFO, attempt=attempt)
    for text in lines:
        capture.note(text)
    capture.save()


@pytest.mark.django_db
def test_a_requeued_attempt_keeps_its_opening_lines(make_schedule, now):
    run = run_trigger_manual(schedule=make_schedule("twice", retry_max_attempts=3), actor="tests", now=now)
    # the heartbeat pump saved attempt 1's first lines; then its worker was lost (killed, or fenced)
    _attempt(run.pk, 1, "started on w1, attempt 1 of 3", "no watermark", "command: job")
    _attempt(run.pk, 2, "started on w2, attempt 2 of 3")

    messages = list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("message", flat=True))
    assert "started on w2, attempt 2 of 3" in messages


@pytest.mark.django_db
def test_a_lost_attempts_late_lines_do_not_take_the_next_attempts_places(make_schedule, now):
    run = run_trigger_manual(schedule=make_schedule("twice", retry_max_attempts=3), actor="tests", now=now)
    _attempt(run.pk, 2, "started on w2, attempt 2 of 3", "finished SUCCEEDED")
    _attempt(run.pk, 1, "started on w1, attempt 1 of 3", "late line of the cut-off worker")  # its network healed
    messages = list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("message", flat=True))
    assert messages == ["started on w1, attempt 1 of 3", "late line of the cut-off worker",
                        "started on w2, attempt 2 of 3", "finished SUCCEEDED"]
