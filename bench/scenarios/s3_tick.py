"""Scenario 3: the due-schedule tick with 100,000 schedules, 100 of them due.

The schedules are bulk-inserted (the tick reads rows, it does not care how
they were saved); 100 cron schedules are due, the rest fire in an hour. Each
repetition puts the same 100 back to due and deletes the runs of the previous
one, outside the timed part. Measured twice, at 10k and at 100k schedules, to
show the cost follows the due schedules, not all of them.

"fire" is `fire_due_schedules` (the due query and 100 runs created); "dispatch
tick" is the whole `dispatch_tick` (fire, backfill pump, waiting release,
admission, watchdog) with the broker hand-off stubbed out.

The 100 due schedules share one cron expression ("0 * * * *"), as schedules
due in the same second usually do, and the tick computes a shared fire time
once. The last row gives each of them its own expression (all due at 12:00),
so every fire time is computed: the worst case.
"""
from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

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

TITLE = "due-schedule tick, 100 due"
SIZES = {"schedules": 100_000, "due": 100, "repeat": 5}
NOW = datetime(2026, 3, 2, 12, 0, 30, tzinfo=timezone.utc)


def add_schedules(start: int, stop: int, due: int) -> None:
    from scheduler.models import Schedule, Team, WorkloadClass

    wc = WorkloadClass.objects.get(name="standard")
    owner = Team.default_team_id()  # bulk_create skips Schedule.save, which fills it in
    fire, later = NOW.replace(second=0), NOW.replace(second=0) + timedelta(hours=1)
    batch = []
    for i in range(start, stop):
        batch.append(Schedule(
            name=f"bench-{i:06d}", target_id="demo.noop", workload_class=wc, trigger_kind="cron", owner_id=owner,
            trigger_config={"cron": "0 * * * *"}, next_fire_at=fire if i < due else later,
        ))
        if len(batch) == 5000:
            Schedule.objects.bulk_create(batch)
            batch = []
    if batch:
        Schedule.objects.bulk_create(batch)


def reset(due: int) -> None:
    from scheduler.models import Run, Schedule

    Run.objects.all().delete()
    names = [f"bench-{i:06d}" for i in range(due)]
    Schedule.objects.filter(name__in=names).update(next_fire_at=NOW.replace(second=0), last_fire_at=None)


def distinct_expressions(due: int) -> None:
    """Give each due schedule its own cron expression, every one of them due at 12:00 UTC."""
    from scheduler.models import Schedule

    exprs = [f"0,{m} * * * *" for m in range(1, 60)] + [f"0,{m} 12 * * *" for m in range(1, 60)]
    assert due <= len(exprs), f"at most {len(exprs)} distinct expressions"
    for i in range(due):
        Schedule.objects.filter(name=f"bench-{i:06d}").update(trigger_config={"cron": exprs[i]})


def measure_fire(due: int, repeat: int) -> dict:
    from scheduler.services.admission.firing import fire_due_schedules

    fire_ms, fire_q = [], []
    for _ in range(repeat):
        reset(due)
        q, s, created = count_queries(lambda: fire_due_schedules(now=NOW))
        assert created == due, f"expected {due} runs, got {created}"
        fire_ms.append(s * 1000)
        fire_q.append(q)
    return {"fire_ms_median": median(fire_ms), "fire_ms_p95": pct(fire_ms, 95), "fire_queries": max(fire_q)}


def measure(label: str, due: int, repeat: int, profile: bool) -> dict:
    from scheduler.models import Run
    from scheduler.services.admission.dispatch import dispatch_tick
    from scheduler.services.admission.firing import fire_due_schedules

    out: dict = {}
    fire_ms, fire_q, tick_ms, tick_q = [], [], [], []
    for i in range(repeat):
        reset(due)
        q, s, created = count_queries(lambda: fire_due_schedules(now=NOW))
        assert created == due, f"expected {due} runs, got {created}"
        fire_ms.append(s * 1000)
        fire_q.append(q)
    if profile:
        reset(due)
        with maybe_profile(f"s3-fire-{label}", True):  # an extra, untimed tick
            fire_due_schedules(now=NOW)
    with mock.patch("scheduler.services.admission.dispatch.enqueue_execution"):
        for _ in range(repeat):
            reset(due)
            q, s, _ = count_queries(lambda: dispatch_tick(now=NOW, holder="bench"))
            tick_ms.append(s * 1000)
            tick_q.append(q)
    assert Run.objects.count() == due
    out["fire_ms_median"], out["fire_ms_p95"], out["fire_queries"] = median(fire_ms), pct(fire_ms, 95), max(fire_q)
    # the steady state: a first tick may do one-time work (the governance watchdog's first look)
    out["tick_ms_median"], out["tick_ms_p95"], out["tick_queries"] = median(tick_ms), pct(tick_ms, 95), tick_q[-1]
    return out


def run(schedules: int = 100_000, due: int = 100, repeat: int = 10, profile: bool = False, db: str = "-") -> Result:
    from django.db import connection

    result = Result(3, TITLE, db)
    small = max(due * 2, schedules // 10)
    add_schedules(0, small, due)
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE scheduler_schedule")
    at_small = measure(f"{small}", due, repeat, False)
    add_schedules(small, schedules, due)
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE scheduler_schedule")
    at_big = measure(f"{schedules}", due, repeat, profile)
    distinct_expressions(due)
    at_distinct = measure_fire(due, repeat)
    result.details = {"small": small, "big": schedules, "due": due, f"at_{small}": at_small, f"at_{schedules}": at_big,
                      "distinct_expressions": at_distinct}
    result.add(f"fire {due} due of {schedules:,} schedules (median)", at_big["fire_ms_median"], "ms", "<= 20 ms",
               at_big["fire_ms_median"] <= 20)
    result.add(f"fire {due} due of {small:,} schedules (median)", at_small["fire_ms_median"], "ms", "", None)
    result.add(f"queries per fire, {small:,} -> {schedules:,} schedules",
               None, f"{at_small['fire_queries']} -> {at_big['fire_queries']}", "constant",
               at_small["fire_queries"] == at_big["fire_queries"])
    result.add(f"whole dispatch tick, {schedules:,} schedules (median)", at_big["tick_ms_median"], "ms", "", None)
    result.add(f"queries per dispatch tick, {small:,} -> {schedules:,} schedules", None,
               f"{at_small['tick_queries']} -> {at_big['tick_queries']}", "constant",
               abs(at_small["tick_queries"] - at_big["tick_queries"]) <= 0.02 * at_big["tick_queries"])
    result.add(f"fire {due} due of {schedules:,}, each its own cron expression (median)",
               at_distinct["fire_ms_median"], "ms", "", None)
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    schedules = args.schedules or (10_000 if args.quick else SIZES["schedules"])
    due = args.due or SIZES["due"]
    repeat = args.repeat or (3 if args.quick else SIZES["repeat"])
    with scratch_database(args.db) as url:
        setup_django(url)
        result = run(schedules=schedules, due=due, repeat=repeat, profile=args.profile, db=args.db)
    emit(result, args.out)


if __name__ == "__main__":
    main()
