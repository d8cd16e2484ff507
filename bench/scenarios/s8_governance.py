"""Scenario 8: one governance tick with 10,000 RUNNING runs.

Fresh: every run heartbeated a second ago, so the tick finds nothing to do
(the common case, every 15 s). Stale: every run's heartbeat is an hour old,
so the tick re-queues the lost ones; it handles at most 1,000 per tick by
design, so the figure is the cost of one such tick.
"""
from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    Result,
    count_queries,
    emit,
    maybe_profile,
    median,
    pct,
    scenario_args,
    scratch_database,
    setup_django,
)

TITLE = "governance tick, RUNNING runs"
SIZES = {"runs": 10_000, "repeat": 10}
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def seed(n: int) -> None:
    from scheduler.models import Run, RunStatus, Schedule, Team, WorkloadClass

    wc = WorkloadClass.objects.get(name="standard")
    owner = Team.default_team_id()  # bulk_create skips Schedule.save, which fills it in
    schedules = Schedule.objects.bulk_create([
        Schedule(name=f"gov-{i:03d}", target_id="demo.noop", workload_class=wc, retry_max_attempts=3, owner_id=owner)
        for i in range(100)
    ])
    runs = []
    for i in range(n):
        runs.append(Run(
            schedule=schedules[i % 100], trigger_key=f"bench:{i}", trigger_kind="manual", workload_class=wc,
            status=RunStatus.RUNNING, attempt=1, max_attempts=3, queued_at=NOW - timedelta(minutes=5),
            admitted_at=NOW - timedelta(minutes=5), started_at=NOW - timedelta(minutes=5),
            heartbeat_at=NOW - timedelta(seconds=1), dispatch_token=f"tok{i}", worker_id="bench@host:1",
        ))
        if len(runs) == 5000:
            Run.objects.bulk_create(runs)
            runs = []
    if runs:
        Run.objects.bulk_create(runs)


def run(runs: int = 10_000, repeat: int = 10, profile: bool = False, db: str = "-") -> Result:
    from django.db import connection

    from scheduler.models import Run, RunStatus
    from scheduler.services.cluster.governance import governance_tick

    result = Result(8, TITLE, db)
    seed(runs)
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE scheduler_run")
    fresh_ms, fresh_q = [], []
    for i in range(repeat + (1 if profile else 0)):
        with maybe_profile("s8-fresh", profile and i == repeat):
            q, s, tick = count_queries(lambda: governance_tick(now=NOW, holder="bench"))
        assert not tick.error, tick.error
        if i < repeat:  # the profiled extra tick is not timed
            fresh_ms.append(s * 1000)
            fresh_q.append(q)
    assert Run.objects.filter(status=RunStatus.RUNNING).count() == runs

    stale_ms, stale_q, handled = [], [], []
    stale_repeat = max(1, repeat // 3)
    for i in range(stale_repeat + (1 if profile else 0)):
        Run.objects.filter(status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=NOW - timedelta(minutes=5), attempt=1, dispatch_token="tok",
        )
        Run.objects.update(heartbeat_at=NOW - timedelta(hours=1))
        with maybe_profile("s8-stale", profile and i == stale_repeat):
            q, s, tick = count_queries(lambda: governance_tick(now=NOW, holder="bench"))
        assert not tick.error, tick.error
        if i == stale_repeat:
            continue  # the profiled extra tick is not timed
        stale_ms.append(s * 1000)
        stale_q.append(q)
        handled.append(len(tick.actions.get("requeued", [])) + len(tick.actions.get("failed", [])))
    result.details = {"fresh_ms": fresh_ms, "fresh_queries": fresh_q, "stale_ms": stale_ms,
                      "stale_queries": stale_q, "stale_handled": handled}
    m = median(fresh_ms)
    result.add(f"tick, {runs:,} RUNNING, fresh heartbeats (median)", m, "ms", "<= 200 ms", m <= 200)
    result.add("  p95", pct(fresh_ms, 95), "ms", "", None)
    result.add("  queries per tick", fresh_q[-1], "queries", "", None)
    s = median(stale_ms)
    result.add(f"tick, {runs:,} RUNNING, all stale ({handled[-1]:,} re-queued per tick)", s, "ms", "<= 200 ms",
               s <= 200)
    result.add("  queries per tick", stale_q[-1], "queries", "", None)
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    n = args.runs or (2_000 if args.quick else SIZES["runs"])
    repeat = args.repeat or (3 if args.quick else SIZES["repeat"])
    with scratch_database(args.db) as url:
        setup_django(url)
        result = run(runs=n, repeat=repeat, profile=args.profile, db=args.db)
    emit(result, args.out)


if __name__ == "__main__":
    main()
