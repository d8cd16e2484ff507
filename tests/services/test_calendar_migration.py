"""The data migration to [low, high) windows: no row skipped, none loaded twice, across the change.

The migration's functions run on the current models (same columns), so the test
does not depend on which migrations other work adds after it.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from importlib import import_module

import pytest
from django.apps import apps

from scheduler.core import WatermarkState as Mark
from scheduler.core import compute_window
from scheduler.models import BackfillWindow, Run, RunStatus, WatermarkHistory, WindowStatus
from scheduler.models import WatermarkState as MarkRow
from scheduler.services.admission.backfills import backfill_submit
from scheduler.services.runs.queue import run_enqueue
from scheduler.services.runs.watermarks import watermark_config, watermark_state

pytestmark = pytest.mark.django_db
MIGRATION = "scheduler.migrations.0004_calendar_windows"
UTC = timezone.utc
M = datetime(2013, 3, 10, tzinfo=UTC)  # the old mark: rows up to and including M were loaded
US = timedelta(microseconds=1)


@pytest.fixture
def migration():
    return import_module(MIGRATION)


def _stamps():
    """Rows around the mark at the source's resolution (microseconds)."""
    return [M - timedelta(hours=1), M - US, M, M + US, M + timedelta(minutes=1), M + timedelta(hours=1)]


def test_the_migration_is_wired_forwards_and_backwards(migration):
    ops = [op for op in migration.Migration.operations if op.__class__.__name__ == "RunPython"]
    assert [(op.code, op.reverse_code) for op in ops] == [(migration.forwards, migration.backwards)]


def test_a_datetime_mark_moves_one_microsecond_so_each_row_is_loaded_exactly_once(make_schedule, now, migration):
    schedule = make_schedule("live", watermark_config={"type": "datetime", "column": "ts",
                                                       "initial": "2013-01-01T00:00:00+00:00"})
    MarkRow.objects.create(schedule=schedule, value=M.isoformat())
    before_change = [t for t in _stamps() if t <= M]  # what (low, high] windows up to M loaded
    migration.forwards(apps, None)
    config = watermark_config(schedule)
    window = compute_window(config, watermark_state(schedule, config), M + timedelta(days=1))
    after_change = [t for t in _stamps() if window.contains(t)]
    assert window.low == M + US
    assert sorted(before_change + after_change) == _stamps()  # nothing skipped, nothing twice
    history = WatermarkHistory.objects.get(schedule=schedule)
    assert (history.old_value, history.new_value) == (M.isoformat(), (M + US).isoformat())
    assert history.actor == migration.WHO


def test_integer_marks_and_schedules_without_a_mark_are_left_alone(make_schedule, migration):
    ids = make_schedule("ids", watermark_config={"type": "integer", "column": "id"})
    MarkRow.objects.create(schedule=ids, value="500")
    fresh = make_schedule("fresh", watermark_config={"type": "datetime", "column": "ts",
                                                     "initial": "2013-01-01T00:00:00+00:00"})
    MarkRow.objects.create(schedule=fresh, value="")
    migration.forwards(apps, None)
    assert watermark_state(ids).value == 500 and watermark_state(fresh).value is None
    assert not WatermarkHistory.objects.exists()


def test_windows_cut_but_not_yet_loaded_keep_exactly_their_rows(make_schedule, now, migration):
    schedule = make_schedule("live", watermark_config={"type": "datetime", "column": "ts",
                                                       "initial": "2013-01-01T00:00:00+00:00"})
    backfill = backfill_submit(schedule=schedule, start="2013-03-09T00:00:00+00:00",
                               end="2013-03-11T00:00:00+00:00", window=86400, reason="r", requested_by="t", now=now)
    done, pending = BackfillWindow.objects.filter(backfill=backfill).order_by("seq")
    BackfillWindow.objects.filter(pk=done.pk).update(status=WindowStatus.SUCCEEDED)
    queued = run_enqueue(schedule=schedule, trigger_kind="manual", trigger_key="k", now=now,
                         window=(M.isoformat(), (M + timedelta(hours=1)).isoformat()))
    finished = run_enqueue(schedule=schedule, trigger_kind="manual", trigger_key="k2", now=now,
                           window=(M.isoformat(), (M + timedelta(hours=1)).isoformat()))
    Run.objects.filter(pk=finished.pk).update(status=RunStatus.SUCCEEDED)
    old = (pending.low, pending.high)
    migration.forwards(apps, None)
    pending.refresh_from_db()
    queued.refresh_from_db()
    finished.refresh_from_db()
    assert (pending.low, pending.high) == tuple((datetime.fromisoformat(v) + US).isoformat() for v in old)
    assert BackfillWindow.objects.get(pk=done.pk).low == done.low  # already loaded: history, untouched
    assert queued.window_low == (M + US).isoformat() and finished.window_low == M.isoformat()


def test_backwards_undoes_forwards(make_schedule, migration):
    schedule = make_schedule("live", watermark_config={"type": "datetime", "column": "ts",
                                                       "initial": "2013-01-01T00:00:00+00:00"})
    MarkRow.objects.create(schedule=schedule, value=M.isoformat())
    migration.forwards(apps, None)
    migration.backwards(apps, None)
    assert watermark_state(schedule).value == M
    assert Mark(M) == watermark_state(schedule)
