"""Profiles of the load benchmark's scheduler path in this process (bench/load.py --profile): one window's
pipeline, and a chain of windows through the worker's run path with the statements each window sends."""
from __future__ import annotations

import json
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

from bench.common import RESULTS, ROOT
from bench.load_data import fresh_target


def profile_window(low: datetime, days: float) -> None:
    """One window's pipeline in this process under pyinstrument (the cluster's workers are not profiled)."""
    from pyinstrument import Profiler

    import bench.load_pipelines  # noqa: F401  registers the pipelines
    from scheduler.core.windows import Window
    from scheduler.pipelines.context import RunContext
    from scheduler.pipelines.registry import get_pipeline

    fresh_target("flights_live")
    ctx = RunContext(run_id=None, schedule="profile", window=Window(low, low + timedelta(days=days)))
    profiler = Profiler(interval=0.0005)
    profiler.start()
    rows = get_pipeline("bench.flights_live").build(ctx).run().rows
    profiler.stop()
    out = RESULTS / f"profile-load-window-{days:g}d.txt"
    out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    print(f"profile of one {days:g}-day window ({rows} rows) in {out.relative_to(ROOT)}", file=sys.stderr)


def profile_chain(low: datetime, days: float, windows: int = 10) -> dict:
    """`windows` windows of an incremental schedule through the worker's run path in this process (execute_run,
    which follows each capped window with the next as the cluster's worker does), under pyinstrument; the
    statements each window sends to the scheduler's database, by kind. Returns the counts."""
    from pyinstrument import Profiler

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduler.models import Run, RunStatus
    from scheduler.services.admission.dispatch import admit_runs
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_trigger_manual
    from scheduler.services.definitions.schedules import schedule_save

    fresh_target("flights_live")
    high = low + timedelta(days=days * windows)
    schedule = schedule_save(data={
        "name": "flights-profile", "target_id": "bench.flights_live", "trigger_kind": "manual",
        "retry_max_attempts": 1,
        "watermark_config": {"type": "datetime", "column": "time_hour", "initial": low.isoformat(),
                             "max_window": days * 86400, "until": high.isoformat()},
    }, actor="bench")
    run_trigger_manual(schedule=schedule, actor="bench")
    sent: list[tuple[int, str]] = []
    admit_runs(now=datetime.now(timezone.utc), holder="bench", send=sent.extend)
    profiler = Profiler(interval=0.0005)
    with CaptureQueriesContext(connection) as queries:
        profiler.start()
        t0 = time.perf_counter()
        execute_run(*sent[0])
        seconds = time.perf_counter() - t0
        profiler.stop()
    done = Run.objects.filter(schedule=schedule, status=RunStatus.SUCCEEDED).count()
    kinds = Counter(q["sql"].split(None, 1)[0].upper() for q in queries.captured_queries)
    out = RESULTS / f"profile-load-chain-{days:g}d.txt"
    out.write_text(profiler.output_text(unicode=False, color=False, show_all=False))
    facts = {"windows": done, "seconds": round(seconds, 3), "statements": len(queries.captured_queries),
             "statements_per_window": round(len(queries.captured_queries) / max(1, done), 1),
             "by_kind_per_window": {k: round(v / max(1, done), 1) for k, v in kinds.most_common()}}
    two_windows = queries.captured_queries[: len(queries.captured_queries) // max(1, done) * 2]
    (RESULTS / f"profile-load-chain-{days:g}d.sql.txt").write_text("\n".join(q["sql"][:300] for q in two_windows))
    print(f"chain of {done} windows in process: {json.dumps(facts)}; profile in {out.relative_to(ROOT)}",
          file=sys.stderr)
    Run.objects.filter(schedule=schedule).delete()
    return facts
