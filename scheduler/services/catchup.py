"""Catching up: the next window starts at once, on the worker that ran the last one.

A window cut by `max_window` queues the next slice in the same transaction as
its success (finish.py); a backfill has its next window pending. Left to the
dispatch loop and the broker, the source would idle a tick and a broker poll
between windows (issue 25, the load benchmark: 0.12 s to 0.19 s a window, a
fifth to a third of a year's catch-up). Instead the worker does what the loop's
tick would: pumps the backfill, then asks the gate, the same `admit_runs`
(class limits, rate limits, breakers, serial schedules all hold), and keeps the
window of its own schedule (and backfill) to run next; whatever else the gate
admitted goes to the broker as usual. An admitted run this worker never begins
(it died) is a lost message to governance, like any other.
"""
from __future__ import annotations

import logging
from datetime import datetime

from scheduler.models import Run
from scheduler.services.backfills import backfill_pump
from scheduler.services.dispatch import admit_runs, hand_off

log = logging.getLogger(__name__)


def catchup_admit_next(*, run: Run, holder: str, now: datetime) -> list[tuple[int, str]]:
    """Admit what may start now; the (run id, token) of the next window of `run`'s schedule and backfill (none for a
    live run), if admitted, to run here."""
    kept: list[tuple[int, str]] = []

    def send(pairs: list[tuple[int, str]]) -> None:
        ours = set(Run.objects.filter(pk__in=[pk for pk, _ in pairs], schedule_id=run.schedule_id,
                                      backfill_id=run.backfill_id).values_list("pk", flat=True))
        kept.extend([pair for pair in pairs if pair[0] in ours][:1])
        rest = [pair for pair in pairs if pair not in kept]
        if rest:
            hand_off(rest)

    try:
        if run.backfill_id is not None:
            backfill_pump(now=now)  # its next pending window queued, as the dispatch loop's tick would
        admit_runs(now=now, holder=holder, send=send)
    except Exception:  # the run's end is written; the dispatch loop admits and sends the slice on its next tick
        log.warning("could not admit the next catch-up slice of run %s at once", run.pk, exc_info=True)
    return kept
