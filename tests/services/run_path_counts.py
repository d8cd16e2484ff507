"""The SQL statements of a run's whole path, counted by phase (issue 35): the statement budget's measuring side.

A run's path is its trigger (a person's manual trigger, or a cron fire), its admission (one dispatch tick, the
hand-off to the broker stubbed: it writes nothing to the database), its claim and execution by a worker and its end.
`lone()` counts one run alone; `batch(100)` counts 100 runs through one tick and the messages `hand_off` packs
them into, per run. Each phase's statements are captured on this thread's connection (the heartbeat pump and a
batch's flush timer use their own, and are kept out: the flush interval is set past the test's length).
"""
from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Iterator
from unittest import mock

from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduler.models import Run, RunStatus, Schedule, WorkloadClass
from scheduler.services.admission import dispatch
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.admission.firing import fire_due_schedules
from scheduler.services.cluster.batch import execute_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual

PHASES = ("trigger", "admission", "execution")


class Counter:
    """Statements per phase, and the SQL of each (for the message of a failing budget)."""

    def __init__(self) -> None:
        self.sql: dict[str, list[str]] = {phase: [] for phase in PHASES}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with CaptureQueriesContext(connection) as queries:
            yield
        self.sql[name].extend(q["sql"] for q in queries.captured_queries)

    def counts(self, runs: int = 1) -> dict[str, float]:
        out = {phase: round(len(sql) / runs, 2) for phase, sql in self.sql.items()}
        out["total"] = round(sum(len(sql) for sql in self.sql.values()) / runs, 2)
        return out


@contextmanager
def _handed_off(messages: list[list[tuple[int, str]]]) -> Iterator[None]:
    """`hand_off` as the cluster does it (its packing into messages), the broker's send recorded, not made."""
    with mock.patch.object(dispatch, "enqueue_execution", side_effect=lambda rid, tok: messages.append([(rid, tok)])), \
            mock.patch.object(dispatch, "enqueue_executions", side_effect=lambda pairs: messages.append(list(pairs))):
        yield


def _execute(messages: list[list[tuple[int, str]]], now: datetime) -> None:
    for message in messages:
        if len(message) == 1:
            assert execute_run(*message[0], clock=lambda: now) == RunStatus.SUCCEEDED
        else:
            assert set(execute_runs(message, clock=lambda: now).values()) == {RunStatus.SUCCEEDED}


def lone(schedule: Schedule, now: datetime) -> Counter:
    """One manual run of `schedule`, alone: trigger, one tick, its message, its end."""
    counter, messages = Counter(), []
    with counter.phase("trigger"):
        run_trigger_manual(schedule=schedule, actor="tests", now=now)
    with _handed_off(messages), counter.phase("admission"):
        dispatch_tick(now=now, holder="budget")
    with counter.phase("execution"):
        _execute(messages, now)
    assert [len(m) for m in messages] == [1]
    return counter


def batch(schedules: list[Schedule], now: datetime, *, cron: bool = False) -> Counter:
    """One run of each schedule: triggered one by one (manual), or fired by the tick (cron, all due), then one tick
    admits them all and the workers execute the messages it hands off."""
    WorkloadClass.objects.filter(name="standard").update(concurrency_limit=len(schedules))
    counter, messages = Counter(), []
    with counter.phase("trigger"):
        if cron:  # the tick's first step, on its own: the rest of the tick finds nothing more due
            assert fire_due_schedules(now=now) == len(schedules)
        else:
            for schedule in schedules:
                run_trigger_manual(schedule=schedule, actor="tests", now=now)
    with _handed_off(messages), counter.phase("admission"):
        dispatch_tick(now=now, holder="budget")
    with counter.phase("execution"):
        _execute(messages, now + timedelta(seconds=1))
    assert sum(len(m) for m in messages) == len(schedules) == Run.objects.filter(status=RunStatus.SUCCEEDED).count()
    return counter
