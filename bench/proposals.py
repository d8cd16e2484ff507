"""Changes the profiles suggest in files the benchmark does not own, measured here before they land.

Each proposal is a context manager that patches the running process only;
`bench/run.py --proposals` reports the figure with and without it. The exact
change is written out in docs/benchmarks.md for the file's owner.
"""
from __future__ import annotations

import contextlib
from typing import Iterator
from unittest import mock


def _fires_between_growing(self, config, *, timezone, after, until, keep):
    # Same contract as TriggerPlugin._fires_between, but the first batch is
    # keep + 1 fires instead of 256: a due schedule usually has one fire in
    # the window, and each croniter step costs ~40 us.
    kept: list = []
    cursor = after
    size = keep + 1
    while True:
        batch = self.next_fires(config, timezone=timezone, after=cursor, count=min(size, 256))
        inside = [f for f in batch if f <= until]
        kept = (kept + inside)[-keep:]
        if len(inside) < len(batch) or not batch:
            return kept
        cursor = batch[-1]
        size *= 2


@contextlib.contextmanager
def small_first_cron_batch() -> Iterator[None]:
    from scheduler.triggers.base import TriggerPlugin

    with mock.patch.object(TriggerPlugin, "_fires_between", _fires_between_growing):
        yield
