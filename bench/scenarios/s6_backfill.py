"""Scenario 6: submit a backfill of 10 years of hourly windows (87,600), all stored up front."""
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
    scenario_args,
    scratch_database,
    setup_django,
)

TITLE = "backfill submit, hourly windows"
SIZES = {"windows": 87_600, "repeat": 3}
START = datetime(2015, 1, 1, tzinfo=timezone.utc)


def run(windows: int = 87_600, repeat: int = 3, profile: bool = False, db: str = "-") -> Result:
    from scheduler.models import BackfillWindow
    from scheduler.services.admission.backfills import backfill_submit
    from scheduler.services.definitions.schedules import schedule_save

    result = Result(6, TITLE, db)
    schedule = schedule_save(data={
        "name": "bench-backfill", "target_id": "demo.noop", "trigger_kind": "manual",
        "watermark_config": {"type": "datetime", "column": "ts", "initial": START.isoformat()},
    }, actor="bench")
    end = START + timedelta(hours=windows)
    times, queries = [], []
    for i in range(repeat + (1 if profile else 0)):
        with maybe_profile("s6-backfill", profile and i == repeat):
            q, s, backfill = count_queries(lambda: backfill_submit(
                schedule=schedule, start=START.isoformat(), end=end.isoformat(), window=3600,
                reason="bench", requested_by="bench",
            ))
        assert BackfillWindow.objects.filter(backfill=backfill).count() == windows
        if i < repeat:  # the profiled extra submit is not timed
            times.append(s)
            queries.append(q)
    t = median(times)
    result.details = {"times_s": times, "queries": queries}
    result.add(f"submit {windows:,} hourly windows (median of {repeat})", t, "s", "<= 2 s", t <= 2.0)
    result.add("queries per submit", queries[-1], "queries", "bulk inserts", queries[-1] <= windows // 100)
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    windows = args.windows or (8_760 if args.quick else SIZES["windows"])
    repeat = args.repeat or (1 if args.quick else SIZES["repeat"])
    with scratch_database(args.db) as url:
        setup_django(url)
        result = run(windows=windows, repeat=repeat, profile=args.profile, db=args.db)
    emit(result, args.out)


if __name__ == "__main__":
    main()
