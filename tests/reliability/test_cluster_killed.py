"""A whole cluster SIGKILLed in the middle of a 200-window backfill, then restarted.

Every window ends SUCCEEDED exactly once in the ledger, the sink holds every
row exactly once, and the progress the pages show never goes backwards.
"""
from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from scheduler.models import Backfill, BackfillStatus, BackfillWindow, Run, RunStatus, WatermarkState, WindowStatus
from scheduler.services.admission.backfills import backfill_progress, backfill_submit
from tests.integration.cluster import kill_cluster, start_cluster, stop_cluster, wait_until
from tests.reliability import LOST_AFTER_A_KILL

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
MODULES = "scheduler.pipelines.demo,tests.reliability.pipelines"
WINDOWS, SIZE = 200, 10
ENV = {"ETL_PIPELINE_MODULES": MODULES, **LOST_AFTER_A_KILL}


class ProgressWatch:
    """Samples backfill_progress on every poll and remembers every sample."""

    def __init__(self, backfill: Backfill) -> None:
        self.backfill, self.samples = backfill, []

    def sample(self) -> dict:
        progress = backfill_progress(self.backfill)
        self.samples.append(progress)
        return progress

    def done_at_least(self, n: int):
        return lambda: self.sample()["done"] >= n

    def completed(self) -> bool:
        self.sample()
        return Backfill.objects.filter(pk=self.backfill.pk, status=BackfillStatus.COMPLETED).exists()


def _sink(path) -> tuple[list[int], list[tuple[int, int, int, int]]]:
    with sqlite3.connect(path, timeout=30) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM items ORDER BY id")]
        loads = conn.execute("SELECT run_id, low, high, n FROM loads").fetchall()
    return ids, loads


def test_a_cluster_killed_mid_backfill_and_restarted_finishes_every_window_exactly_once(make_schedule, tmp_path):
    import tests.reliability.pipelines  # noqa: F401  registers the pipeline in this process too

    target, log = tmp_path / "target.db", tmp_path / "cluster.log"
    schedule = make_schedule("windows", target_id="reliability.windows", retry_max_attempts=3,
                             watermark_config={"type": "integer", "column": "id", "initial": 0},
                             params={"target": str(target), "seconds": 0.02})
    backfill = backfill_submit(schedule=schedule, start=0, end=WINDOWS * SIZE, window=SIZE, reason="reload",
                               requested_by="tests", max_parallel=4)
    assert backfill.total_windows == WINDOWS
    watch = ProgressWatch(backfill)

    first = start_cluster("bf1", log_path=log, extra_env=ENV)
    try:
        wait_until(watch.done_at_least(40), timeout=60, what="40 windows to finish", log_path=log)
    finally:
        kill_cluster(first)  # the whole process group: sentinel, workers, loops; no clean-up at all
    killed_at = watch.sample()
    assert killed_at["done"] < WINDOWS, "the backfill finished before the kill: nothing was tested"
    # the new cluster can dispatch only once the dead one's leases expire
    second = start_cluster("bf2", log_path=log, extra_env=ENV)
    try:
        wait_until(watch.completed, timeout=80, what="the backfill to complete after the restart", log_path=log)
    finally:
        assert stop_cluster(second) == 0, log.read_text()[-3000:]

    done = [s["done"] for s in watch.samples]
    assert done == sorted(done), "backfill progress went backwards"
    assert watch.sample() == {"total": WINDOWS, "done": WINDOWS, "failed": 0, "running": 0, "queued": 0,
                              "pending": 0, "cancelled": 0}

    # the ledger: one SUCCEEDED run per window, nothing else left active
    windows = list(BackfillWindow.objects.filter(backfill=backfill).order_by("seq"))
    assert {w.status for w in windows} == {WindowStatus.SUCCEEDED}
    succeeded = Counter(Run.objects.filter(backfill=backfill, status=RunStatus.SUCCEEDED)
                        .values_list("window_low", flat=True))
    assert succeeded == Counter(w.low for w in windows), "a window succeeded twice or never"
    assert not Run.objects.filter(backfill=backfill, status__in=RunStatus.active()).exists()

    # the sink: every row exactly once; a window is re-loaded only by a later attempt of a run the kill cut short
    ids, loads = _sink(target)
    assert ids == list(range(1, WINDOWS * SIZE + 1))
    per_window = Counter((low, high) for _run, low, high, _n in loads)
    assert set(per_window) == {(int(w.low), int(w.high)) for w in windows}
    attempts = dict(Run.objects.filter(backfill=backfill).values_list("id", "attempt"))
    for (low, high), count in per_window.items():
        if count > 1:
            runs = {run for run, lo, _hi, _n in loads if lo == low}
            assert len(runs) == 1 and count <= attempts[runs.pop()], (low, high, count)
    # the live watermark is never moved by a backfill
    assert not WatermarkState.objects.filter(schedule=schedule).exclude(value="").exists()
