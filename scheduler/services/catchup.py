"""A watermark catching up: the next slice of a capped window starts at once, on the worker that ran the last.

A window cut by `max_window` queues the next slice in the same transaction as
its success (finish.py). Left to the dispatch loop and the broker, the source
would idle a tick and a broker poll between slices (issue 25, the load
benchmark: 0.12 s per window, a fifth of a year's catch-up). Instead the worker
asks the gate itself, the same `admit_runs` the dispatch loop calls (class
limits, rate limits, breakers, serial schedules all hold), and keeps the
slice of its own schedule to run next; whatever else the gate admitted goes to
the broker as usual. An admitted run this worker never begins (it died) is a
lost message to governance, like any other.
"""
from __future__ import annotations

import logging
from datetime import datetime

from scheduler.models import Run
from scheduler.services.dispatch import admit_runs, hand_off

log = logging.getLogger(__name__)


def catchup_admit_next(*, run: Run, holder: str, now: datetime) -> list[tuple[int, str]]:
    """Admit what may start now; the (run id, token) of `run`'s schedule's next slice, if admitted, to run here."""
    kept: list[tuple[int, str]] = []

    def send(pairs: list[tuple[int, str]]) -> None:
        ours = set(Run.objects.filter(pk__in=[pk for pk, _ in pairs], schedule_id=run.schedule_id)
                   .values_list("pk", flat=True))
        kept.extend([pair for pair in pairs if pair[0] in ours][:1])
        rest = [pair for pair in pairs if pair not in kept]
        if rest:
            hand_off(rest)

    try:
        admit_runs(now=now, holder=holder, send=send)
    except Exception:  # the run's end is written; the dispatch loop admits and sends the slice on its next tick
        log.warning("could not admit the next catch-up slice of run %s at once", run.pk, exc_info=True)
    return kept
