"""Watermarks at the run path's edges (issue 21, point 4): an operator's move during a run is kept (the run's
success advances the mark only from where its window began), integer-watermarked workflows advance, and an
integer mark crosses a gap in the ids wider than max_window without skipping a row."""
from __future__ import annotations

import html
import sqlite3
from datetime import timedelta

import pytest
from django.urls import reverse

from scheduler.core import IdentityTransform, Pipeline, RetryPolicy
from scheduler.models import AuditEntry, Run, RunStatus, WatermarkHistory
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.pipelines.sql import SqlSource
from scheduler.services.cluster.execution import execute_run
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.runs.watermarks import watermark_reset, watermark_set, watermark_state
from tests.services.semantics_helpers import CountingSource, counting_factory, tick, tick_and_execute

pytestmark = pytest.mark.django_db(transaction=True)
S = RunStatus


MOVES: list = []  # what the pipeline does while it reads: (value or None, actor, reason, at)


@pytest.fixture
def marked(make_schedule, now, counter):
    def read(ctx):
        for value, actor, reason, at in MOVES:  # a person moves the mark while the run reads its window
            if value is None:
                watermark_reset(schedule=ctx_schedule[0], actor=actor, reason=reason, now=at)
            else:
                watermark_set(schedule=ctx_schedule[0], value=value, actor=actor, reason=reason, now=at)
        MOVES.clear()
        return [{"id": 1}]

    registry.register_pipeline("test.moved", counting_factory(counter, rows_from_window=read), replace=True)
    ctx_schedule = [make_schedule("marked", target_id="test.moved", retry_max_attempts=1, watermark_config={
        "type": "datetime", "column": "ts", "initial": (now - timedelta(hours=3)).isoformat(),
    })]
    yield ctx_schedule[0]
    MOVES.clear()
    registry._pipelines.pop("test.moved", None)


def test_an_operators_move_during_a_run_is_kept_and_said(marked, now, client, viewer):
    run_trigger_manual(schedule=marked, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    march = now - timedelta(days=270)
    # while the run reads [now-3h, now), an operator reloads from March
    MOVES.append((march.isoformat(), "user:olivia", "reload from March", now + timedelta(seconds=1)))
    execute_run(run_id, token, clock=lambda: now + timedelta(seconds=2))
    run = Run.objects.get(pk=run_id)
    assert run.status == S.SUCCEEDED, "the run's rows are kept"
    assert watermark_state(marked).value == march, "the mark stays where the operator put it"
    assert "watermark not advanced" in run.reason and "olivia" in run.reason and "reload from March" in run.reason
    assert run.watermark_after == ""
    entry = AuditEntry.objects.get(action="watermark.advance_refused")
    assert entry.after["run"] == run_id and entry.before["value"] == march.isoformat()
    assert not WatermarkHistory.objects.filter(schedule=marked, kind="advance").exists()
    client.force_login(viewer)
    page = html.unescape(client.get(reverse("scheduler:run_detail", args=[run_id])).content.decode())
    assert "watermark not advanced" in page and "reload from March" in page, "the run page says so"


def test_a_reset_during_a_run_is_kept(marked, now):
    run_trigger_manual(schedule=marked, actor="tests", now=now)
    tick_and_execute(now)  # a first run moves the mark to now
    later = now + timedelta(hours=1)
    run_trigger_manual(schedule=marked, actor="tests", now=later)
    ((run_id, token),) = tick(later)
    MOVES.append((None, "user:olivia", "start over", later))
    execute_run(run_id, token, clock=lambda: later)
    assert watermark_state(marked).value is None, "still reset: the next run reads from the initial mark"
    assert "watermark not advanced" in Run.objects.get(pk=run_id).reason


def test_without_a_move_the_mark_advances_as_before(marked, now):
    run_trigger_manual(schedule=marked, actor="tests", now=now)
    ((run_id, token),) = tick(now)
    execute_run(run_id, token, clock=lambda: now)
    assert watermark_state(marked).value == now and Run.objects.get(pk=run_id).reason == ""


# --- integer-watermarked workflows ------------------------------------------------------------

IDS = {"ids": [3, 7, 12]}


def _id_node(ctx):
    low = ctx.window.low if ctx.window is not None else 0
    rows = [{"id": i} for i in IDS["ids"] if i > low]
    return Pipeline(CountingSource({}, rows), IdentityTransform(), NoopSink(), watermark_column="id",
                    policy=RetryPolicy(max_attempts=1, initial_delay=0))


def _plain_node(ctx):
    return Pipeline(CountingSource({}, [{"x": 1}]), IdentityTransform(), NoopSink(),
                    policy=RetryPolicy(max_attempts=1, initial_delay=0))


@pytest.fixture
def id_workflow():
    registry.register_workflow("test.id_flow", {"extract": _id_node, "report": _plain_node},
                               [("extract", "report")], replace=True)
    yield "test.id_flow"
    registry._workflows.pop("test.id_flow", None)


def test_an_integer_watermarked_workflow_advances_to_the_largest_id_loaded(make_schedule, now, id_workflow):
    flow = make_schedule("idflow", target_kind="workflow", target_id=id_workflow, retry_max_attempts=1,
                         watermark_config={"type": "integer", "column": "id", "initial": 0})
    run_trigger_manual(schedule=flow, actor="tests", now=now)
    tick_and_execute(now)
    first = Run.objects.get(schedule=flow)
    assert first.status == S.SUCCEEDED and watermark_state(flow).value == 12
    IDS["ids"] = [3, 7, 12, 20]
    try:
        run_trigger_manual(schedule=flow, actor="tests", now=now + timedelta(seconds=1))
        tick_and_execute(now + timedelta(seconds=1))
    finally:
        IDS["ids"] = [3, 7, 12]
    second = Run.objects.filter(schedule=flow).order_by("-id").first()
    assert second.window_low == "12", "the second run reads from where the first stopped"
    assert second.rows_loaded == 2 and watermark_state(flow).value == 20  # id 20 and the report's row


# --- an integer mark across a gap wider than max_window -----------------------------------------

@pytest.fixture
def gappy(tmp_path, make_schedule):
    db = tmp_path / "src.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO events VALUES (?, ?)", [(500, "a"), (5000, "b"), (5001, "c")])
    seen: list[list[int]] = []

    class Recording(NoopSink):
        def load(self, rows):
            seen.append([r["id"] for r in rows])
            return super().load(rows)

    def factory(ctx):
        return Pipeline(SqlSource(f"sqlite:///{db}", table="events", watermark_column="id", window=ctx.window),
                        IdentityTransform(), Recording(), policy=RetryPolicy(max_attempts=1, initial_delay=0))

    registry.register_pipeline("test.gappy", factory, replace=True)
    schedule = make_schedule("gappy", target_id="test.gappy", retry_max_attempts=1,
                             watermark_config={"type": "integer", "column": "id", "initial": 499, "max_window": 1000})
    yield schedule, db, seen
    registry._pipelines.pop("test.gappy", None)


def _run_once(schedule, at):
    run_trigger_manual(schedule=schedule, actor="tests", now=at)
    tick_and_execute(at)
    return Run.objects.filter(schedule=schedule).order_by("-id").first()


def test_an_empty_window_below_the_largest_id_moves_the_mark_without_skipping_a_row(gappy, now):
    schedule, db, seen = gappy
    first = _run_once(schedule, now)
    assert (first.window_low, first.window_high) == ("499", "1499") and seen == [[500]]
    assert watermark_state(schedule).value == 500
    second = _run_once(schedule, now + timedelta(seconds=1))  # (500, 1500] is empty, but ids go on at 5000
    assert second.status == S.SUCCEEDED and second.rows_loaded == 0
    assert watermark_state(schedule).value == 4999, "moved to just below the next id: nothing skipped"
    third = _run_once(schedule, now + timedelta(seconds=2))
    assert seen[-1] == [5000, 5001] and watermark_state(schedule).value == 5001
    assert third.status == S.SUCCEEDED
    # at the top of the source, an empty window does not move the mark past ids that do not exist yet
    fourth = _run_once(schedule, now + timedelta(seconds=3))
    assert fourth.rows_loaded == 0 and watermark_state(schedule).value == 5001
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO events VALUES (5002, 'd')")
    _run_once(schedule, now + timedelta(seconds=4))
    assert seen[-1] == [5002], "the row that came later is read"
    assert sorted(i for batch in seen for i in batch) == [500, 5000, 5001, 5002]
