"""Catching up: the next window starts at once, on the worker that ran the last one.

A window cut by `max_window` queues the next slice in the same transaction as
its success (finish.py); a backfill has its next window pending. Left to the
dispatch loop and the broker, the source would idle a tick and a broker poll
between windows (issue 25, the load benchmark: 0.12 s to 0.19 s a window, a
fifth to a third of a year's catch-up). Instead the worker does what the loop's
tick would, in the transaction of the window's end (execution.py): pumps the
backfill, then asks the gate, the same `admit_runs` (class limits, rate limits,
breakers, serial schedules all hold), and keeps the window of its own schedule
(and backfill) to run next; whatever else the gate admitted goes to the broker
as usual. A live slice with nothing that could make the gate say otherwise is
admitted by one read (`dispatch.admit_slice`). An admitted run this worker
never begins (it died) is a lost message to governance, like any other.
"""
from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from scheduler.models import Run
from scheduler.services.admission.backfills import backfill_pump
from scheduler.services.admission.dispatch import admit_runs, admit_slice, hand_off

log = logging.getLogger(__name__)


def catchup_admit_next(*, run: Run, holder: str, now: datetime) -> list[tuple[int, str, Run]]:
    """Admit what may start now; the next window of `run`'s schedule and backfill (none for a live run), if
    admitted, to run here: (run id, token, the run with its schedule, as admitted). Call in the transaction of
    `run`'s end (execution.py): the list is filled when it commits, and nothing else sees the next window queued
    in between (the dispatch loop would send it to the broker)."""
    kept: list[tuple[int, str, Run]] = []
    admitted: dict[int, Run] = {}

    def send(pairs: list[tuple[int, str]]) -> None:
        ours = [(pk, token) for pk, token in pairs if admitted[pk].schedule_id == run.schedule_id
                and admitted[pk].backfill_id == run.backfill_id][:1]
        kept.extend((pk, token, admitted[pk]) for pk, token in ours)
        rest = [pair for pair in pairs if pair not in ours]
        if rest:
            hand_off(rest)

    try:
        with transaction.atomic():  # a savepoint: a failed admission must not undo the end it follows
            queued = getattr(run, "catchup_slice", None)  # the live slice its end queued (watermarks.py)
            handed = admit_slice(run=queued, now=now, holder=holder) if queued is not None else None
            if handed is not None:
                return [(*handed, queued)]
            if run.backfill_id is not None:
                backfill_pump(now=now)  # its next pending window queued, as the dispatch loop's tick would
            admit_runs(now=now, holder=holder, send=send,
                       on_admitted=lambda runs: admitted.update((r.pk, r) for r in runs))
    except Exception:  # the run's end is written; the dispatch loop admits and sends the slice on its next tick
        log.warning("could not admit the next catch-up slice of run %s at once", run.pk, exc_info=True)
    return kept
