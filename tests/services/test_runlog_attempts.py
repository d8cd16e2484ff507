"""Two attempts of one run write into the same log (a re-queued lost run, a fenced worker's late lines).

Found by the fencing test (tests/reliability/test_fencing.py): every capture numbers its lines from 1, and the
(run, seq) key with ON CONFLICT DO NOTHING drops whichever attempt's lines come second. A killed or fenced
attempt 1 that had saved 3 lines costs attempt 2 its opening lines ("started on ..., attempt 2 of 3"); the
fenced worker's own lines, written when its network heals, are dropped but for the ones numbered past attempt
2's last, among them a closing "finished SUCCEEDED" read from attempt 2's outcome. The fix belongs to
services/runlogs.py (number a capture's lines after what the run's log holds, or by attempt).
"""
from __future__ import annotations

import logging

import pytest

from scheduler.models import RunLogLine
from scheduler.services.runlogs import RunLogCapture
from scheduler.services.runs import run_trigger_manual


def _attempt(run_id: int, *lines: str) -> None:
    """One attempt's capture saves its lines (no reference kept: RunLogCapture.close(row) is not
    logging.Handler.close(), so a capture still alive at exit makes logging.shutdown raise a TypeError)."""
    capture = RunLogCapture(run_id, max_bytes=64 * 1024, max_line=1000, level=logging.INFO)
    for text in lines:
        capture.note(text)
    capture.save()


@pytest.mark.django_db
@pytest.mark.xfail(strict=True, reason="services/runlogs.py numbers every attempt's lines from 1: the second "
                                       "attempt's first lines collide with the first's and are dropped")
def test_a_requeued_attempt_keeps_its_opening_lines(make_schedule, now):
    run = run_trigger_manual(schedule=make_schedule("twice", retry_max_attempts=3), actor="tests", now=now)
    # the heartbeat pump saved attempt 1's first lines; then its worker was lost (killed, or fenced)
    _attempt(run.pk, "started on w1, attempt 1 of 3", "no watermark", "command: job")
    _attempt(run.pk, "started on w2, attempt 2 of 3")

    messages = list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("message", flat=True))
    assert "started on w2, attempt 2 of 3" in messages
