"""Pipelines for the fencing test (tests/reliability/test_fencing.py), imported by its clusters.

Each writes "<word> <attempt> <role> <pid> <time>" lines to params["out"] every 0.1 s: attempt 1 forever,
a later attempt ten lines and then it ends. `reliability.alive` checks for a stop between lines (and notes
"stopped" when it sees one); `reliability.stubborn` never does, so only ending its worker process stops it.
"""
from __future__ import annotations

import os
import time

from scheduler.core import Pipeline
from scheduler.core.stop import RunStopped
from scheduler.pipelines.registry import register_pipeline


def _line(path: str, word: str, attempt: int, role: str) -> None:
    with open(path, "a") as f:  # one short O_APPEND write a line
        f.write(f"{word} {attempt} {role} {os.getpid()} {time.time():.6f}\n")


class _Alive:
    def __init__(self, ctx, *, cooperative: bool) -> None:
        self.ctx, self.cooperative = ctx, cooperative
        self.role = "pipeline" if cooperative else "stubborn"

    def extract(self):
        out, attempt = self.ctx.params["out"], self.ctx.attempt
        n, ignored = 0, False
        try:
            while attempt == 1 or n < 10:
                if self.cooperative:
                    self.ctx.check_cancelled()
                elif self.ctx.cancelled() and not ignored:
                    ignored = True
                    _line(out, "ignored", attempt, self.role)
                _line(out, "alive", attempt, self.role)
                n += 1
                time.sleep(0.1)
        except RunStopped as stopped:
            _line(out, f"stopped-{stopped.kind}", attempt, self.role)
            raise
        return []


class _Nowhere:
    def load(self, rows):
        return len(rows)


register_pipeline("reliability.alive", lambda ctx: Pipeline(_Alive(ctx, cooperative=True), None, _Nowhere()),
                  replace=True)
register_pipeline("reliability.stubborn", lambda ctx: Pipeline(_Alive(ctx, cooperative=False), None, _Nowhere()),
                  replace=True)
