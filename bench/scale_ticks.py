"""The loops' ticks timed in one measuring process of bench/scale.py: dispatch and governance ticks as the loops
call them, with schedules made due before each dispatch tick and its runs deleted after it (untimed)."""
from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import Iterator
from unittest import mock

from django.db import OperationalError

from bench.common import count_queries, pct

DUE_PER_TICK = 10


MIN_REQUESTS = 15  # per page or tick and sample, before a time budget may stop it


@contextlib.contextmanager
def due_schedules(count: int) -> Iterator[None]:
    """`count` cron schedules due now; the runs the tick makes of them are deleted afterwards (untimed)."""
    from django.utils import timezone as tz

    from scheduler.models import Run, Schedule

    from bench.history import CRONS

    mark = Run.objects.order_by("-id").values_list("id", flat=True).first() or 0
    ids = list(Schedule.objects.filter(name__startswith="hist-").order_by("id").values_list("id", flat=True)
               [CRONS.start + 10:CRONS.start + 10 + count])
    # beside a prune (which locks schedule rows) the bench's own writes may lose a deadlock: they are retried
    _retrying(lambda: Schedule.objects.filter(pk__in=ids).update(next_fire_at=tz.now() - timedelta(seconds=1)))
    try:
        yield
    finally:
        _retrying(lambda: _delete_runs(Run.objects.filter(pk__gt=mark)))


def _delete_runs(runs) -> None:
    """Delete the runs a measured tick made, taking back the hour counts of those that ended (a refused fire),
    as a prune does, so the timeline's counts keep matching the ledger."""
    from django.db import transaction

    from scheduler.services.history.hour_counts import runs_uncounted

    with transaction.atomic():
        runs_uncounted(list(runs.values_list("pk", flat=True)))
        runs.delete()


def _retrying(fn, attempts: int = 20):
    for attempt in range(attempts):
        try:
            return fn()
        except OperationalError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.05)


def time_ticks(ticks: int, budget_s: float) -> dict:
    from django.utils import timezone as tz

    from scheduler.services.admission.dispatch import dispatch_tick
    from scheduler.services.cluster.governance import governance_tick

    out: dict = {}
    with mock.patch("scheduler.services.admission.dispatch.enqueue_execution"):
        times, fired, queries, budget = [], [], 0, time.monotonic() + budget_s
        for i in range(ticks + 2):  # two warm-ups
            if i >= 2 + MIN_REQUESTS and time.monotonic() > budget:
                break
            with due_schedules(DUE_PER_TICK):
                queries, seconds, result = count_queries(lambda: dispatch_tick(now=tz.now(), holder="bench"))
            if i >= 2:
                times.append(seconds * 1000)
                fired.append(result["fired"])
        out["dispatch"] = {"p50": pct(times, 50), "p95": pct(times, 95), "queries": queries, "fired": max(fired),
                           "n": len(times)}
    times, budget = [], time.monotonic() + budget_s
    for i in range(ticks + 2):
        if i >= 2 + MIN_REQUESTS and time.monotonic() > budget:
            break
        queries, seconds, tick = count_queries(lambda: governance_tick(now=tz.now(), holder="bench"))
        assert not tick.error, tick.error
        if i >= 2:
            times.append(seconds * 1000)
    out["governance"] = {"p50": pct(times, 50), "p95": pct(times, 95), "queries": queries, "n": len(times)}
    return out
