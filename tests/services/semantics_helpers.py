"""Helpers for the semantics tests: run the dispatch path inline, register counting pipelines."""
from __future__ import annotations

from unittest import mock

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy
from scheduler.models import Run
from scheduler.pipelines.noop import NoopSink
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.cluster.execution import execute_run


def tick(now, holder="test"):
    """One dispatch tick; returns [(run_id, token)] handed to workers (not executed)."""
    sent = []
    # a deep queue goes out several runs a message (enqueue_executions): each run is listed alike
    with mock.patch("scheduler.services.admission.dispatch.enqueue_execution",
                    side_effect=lambda rid, tok: sent.append((rid, tok))), \
            mock.patch("scheduler.services.admission.dispatch.enqueue_executions", side_effect=sent.extend):
        dispatch_tick(now=now, holder=holder)
    return sent


def claim_then_go_silent(run_id, token, now):
    """A worker claims the run (what execute_run does first) and then dies: its heartbeat stops at `now`."""
    Run.objects.filter(pk=run_id, dispatch_token=token).update(started_at=now, heartbeat_at=now, worker_id="c1@host:1")
    return Run.objects.select_related("schedule").get(pk=run_id)


def tick_and_execute(now, holder="test"):
    """Admit every admissible run and execute it inline; returns the executed run ids."""
    sent = tick(now, holder)
    for run_id, token in sent:
        execute_run(run_id, token, clock=lambda: now)
    return [rid for rid, _ in sent]


class CountingSource:
    """Counts extracts; fails when `fail` is set; yields `rows`."""

    def __init__(self, counter: dict, rows=None, fail: bool = False):
        self.counter, self.rows, self.fail = counter, rows or [], fail

    def extract(self):
        self.counter["extracts"] = self.counter.get("extracts", 0) + 1
        if self.fail:
            raise RuntimeError("source down")
        return list(self.rows)


def counting_factory(counter: dict, *, rows_from_window=None, fail=False):
    """A pipeline factory whose source counts calls; params fail=true fails it."""

    def factory(ctx):
        rows = rows_from_window(ctx) if rows_from_window else [{"id": 1}]
        counter.setdefault("windows", []).append(ctx.window)
        return Pipeline(CountingSource(counter, rows, fail or bool(ctx.params.get("fail"))), IdentityTransform(),
                        NoopSink(), policy=RetryPolicy(max_attempts=1, initial_delay=0))

    return factory
