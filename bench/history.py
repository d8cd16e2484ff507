"""A large, realistic history written cheaply with bulk SQL (issue 25): the generator behind bench/scale.py.

    generate_history(runs=10_000_000, now=timezone.now(), progress=print)

Into a migrated database (Django set up), in chunks of one transaction each:

* 5 teams and 200 schedules made through `schedule_save` (so every field is what the product writes):
  10 workflows (`demo.nightly`, 4 nodes), 20 event, 10 webhook, 10 manual, 70 cron and 80 interval schedules,
  spread over the three workload classes; none comes due while it is measured (daily crons, hourly intervals);
* `runs` runs over the year before `now`, evenly in time (ids grow with time, as they do), one schedule after
  another; outcomes 88 % SUCCEEDED, 5 % FAILED (with an error), 3 % SKIPPED, 2 % BLOCKED, 2 % CANCELLED;
* for each workflow run its 4 node records (the last one FAILED in a failed run);
* log lines: 20 for one run in 200, 2,000 (a long log) for one run in 100,000;
* one received event per event run (the run points at it), one audit entry per manual trigger, event and
  cancel (with the schedule's team), one governance tick per 10 runs, spread over the same year; the audit
  log's hourly counts (AuditCount) of those entries, in one INSERT ... SELECT ... GROUP BY after them;
* a few live runs: QUEUED, held back by a retry delay (`not_before` a month ahead), so no tick admits them;
* the counters runs ending one by one would have kept: final statuses (/metrics) and the timeline's hour counts
  (one INSERT ... SELECT ... GROUP BY each over the generated runs).

Every row is an INSERT ... SELECT over a generated series (generate_series on PostgreSQL, a recursive CTE on
SQLite) with explicit ids, so the foreign keys are arithmetic: run id = base + x, its event id = base + x.
While it loads, the secondary indexes of the bulk tables are dropped and afterwards rebuilt in one pass each
(much cheaper than keeping them up to date row by row), and on PostgreSQL the foreign-key triggers are off for
the loading session (`session_replication_role = replica`); the foreign keys hold by construction, which
tests/bench/test_history.py checks. Then ANALYZE.
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Callable

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Count

from scheduler.models import Run, RunHourCount, RunStatus, RunTally, Schedule, Team, WorkloadClass
from scheduler.services.history.audit_counts import audit_counts_from_log
from scheduler.services.history.hour_counts import count_select
from scheduler.services.history.outcomes import outcomes_rebuild
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.access.teams import team_save

SCHEDULES = 200
TEAMS = 5
YEAR = 365 * 24 * 3600
ADMIN = "bench-admin"
# schedule index s = x % SCHEDULES decides what a run is; the ranges below are the schedule families
WORKFLOWS = range(0, 10)
EVENTS = range(10, 30)
WEBHOOKS = range(30, 40)
MANUALS = range(40, 50)
CRONS = range(50, 120)  # and 120..199: interval
NODES = ("extract_customers", "extract_orders", "build_revenue", "publish_report")
LOG_EVERY, LOG_LINES = 200, 20
LONG_LOG_EVERY, LONG_LOG_LINES = 100_000, 2_000
TICK_EVERY = 10
LIVE_RUNS = 5
BULK_TABLES = ("scheduler_run", "scheduler_noderecord", "scheduler_runlogline", "scheduler_auditentry",
               "scheduler_event", "scheduler_governancetick")
ERROR_TEXT = ("Traceback (most recent call last):\n  File \"pipelines/orders.py\", line 88, in extract\n"
              "    rows = source.fetch(window)\nRuntimeError: source unavailable: connection reset by peer "
              "(the upstream database restarted)")


def _schedule_data(s: int, teams: list[Team]) -> dict:
    data = {"name": f"hist-{s:03d}", "owner": teams[s % len(teams)], "target_id": "demo.noop",
            "workload_class": ("standard", "heavy", "critical")[s % 3], "description": f"history schedule {s}"}
    if s in WORKFLOWS:
        return {**data, "target_kind": "workflow", "target_id": "demo.nightly", "trigger_kind": "cron",
                "trigger_config": {"cron": f"{s} 3 * * *"}}
    if s in EVENTS:
        return {**data, "trigger_kind": "event", "trigger_config": {"topic": f"topic-{s % 5}"}}
    if s in WEBHOOKS:
        return {**data, "trigger_kind": "webhook"}
    if s in MANUALS:
        return {**data, "trigger_kind": "manual"}
    if s in CRONS:
        return {**data, "trigger_kind": "cron", "trigger_config": {"cron": f"{s % 60} {s % 24} * * *"}}
    return {**data, "trigger_kind": "interval", "trigger_config": {"seconds": 3600 + s}}


def make_schedules() -> int:
    """Teams, the 200 schedules and the admin; returns the first schedule id (the ids are consecutive)."""
    teams = [team_save(data={"name": f"team-{t}", "description": f"history team {t}"}, actor="bench")
             for t in range(TEAMS)]
    ids = [schedule_save(data=_schedule_data(s, teams), actor="bench").pk for s in range(SCHEDULES)]
    if ids != list(range(ids[0], ids[0] + SCHEDULES)):
        raise RuntimeError("the schedules' ids are not consecutive: generate into a fresh database")
    if not User.objects.filter(username=ADMIN).exists():
        User.objects.create_superuser(ADMIN, "bench@example.com", None)
    return ids[0]


class Sql:
    """The few places where PostgreSQL and SQLite differ: series, time arithmetic, booleans."""

    def __init__(self, start: datetime) -> None:
        self.pg = connection.vendor == "postgresql"
        self.start = start.strftime("%Y-%m-%d %H:%M:%S")

    def ts(self, seconds: str) -> str:
        """The time `seconds` (an integer SQL expression) after the start of the history."""
        if self.pg:
            return f"(TIMESTAMPTZ '{self.start}+00' + ({seconds}) * INTERVAL '1 second')"
        return f"strftime('%Y-%m-%d %H:%M:%f', '{self.start}', '+' || ({seconds}) || ' seconds')"

    def series(self, lo: int, hi: int) -> tuple[str, str]:
        """(prefix, from-clause) that make x run from lo to hi."""
        if self.pg:
            return "", f"generate_series({lo}::bigint, {hi}::bigint) AS g(x)"
        return f"WITH RECURSIVE g(x) AS (SELECT {lo} UNION ALL SELECT x + 1 FROM g WHERE x < {hi}) ", "g"

    def small_series(self, name: str, n: int) -> str:
        """A CTE `name(k)` of 1..n, usable after WITH on both databases."""
        return f"{name}(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM {name} WHERE k < {n})"

    @property
    def true(self) -> str:
        return "TRUE" if self.pg else "1"

    @property
    def false(self) -> str:
        return "FALSE" if self.pg else "0"


def _in(expr: str, family: range) -> str:
    return f"({expr} BETWEEN {family.start} AND {family.stop - 1})"


def insert_runs(cur, sql: Sql, *, lo: int, hi: int, total: int, first_schedule: int, run_base: int,
                event_base: int, classes: list[int], span: int = YEAR) -> None:
    """Runs lo..hi of `total` (x), with their events: event ids are event_base + x, run ids run_base + x."""
    s = f"(x % {SCHEDULES})"
    h = f"(((x / {SCHEDULES}) * 37 + {s} * 13) % 100)"
    status = (f"CASE WHEN {h} < 88 THEN 'SUCCEEDED' WHEN {h} < 93 THEN 'FAILED' WHEN {h} < 96 THEN 'SKIPPED'"
              f" WHEN {h} < 98 THEN 'BLOCKED' ELSE 'CANCELLED' END")
    ran = f"({h} < 93)"  # SUCCEEDED and FAILED runs started; the others never reached a worker
    kind = (f"CASE WHEN {_in(s, EVENTS)} THEN 'event' WHEN {_in(s, WEBHOOKS)} THEN 'webhook'"
            f" WHEN {_in(s, MANUALS)} THEN 'manual' WHEN {s} >= {CRONS.stop} THEN 'interval' ELSE 'cron' END")
    offset = f"((x - 1) * {span} / {total} + (x * 7) % 60)"
    queued = sql.ts(offset)
    started = sql.ts(f"{offset} + x % 5")
    finished = sql.ts(f"{offset} + x % 5 + 5 + (x * 13) % 600")
    timed = f"{_in(s, WORKFLOWS)} OR {_in(s, CRONS)} OR {s} >= {CRONS.stop}"
    wc = f"CASE {s} % 3 WHEN 0 THEN {classes[0]} WHEN 1 THEN {classes[1]} ELSE {classes[2]} END"
    reason = (f"CASE WHEN {h} BETWEEN 88 AND 92 THEN 'RuntimeError: source unavailable'"
              f" WHEN {h} BETWEEN 93 AND 95 THEN 'still fresh: last success less than refresh_after ago'"
              f" WHEN {h} BETWEEN 96 AND 97 THEN 'upstream hist-050 failed'"
              f" WHEN {h} >= 98 THEN 'cancelled by an operator: superseded' ELSE '' END")
    error = f"CASE WHEN {h} BETWEEN 88 AND 92 THEN '{ERROR_TEXT}' ELSE '' END"
    prefix, source = sql.series(lo, hi)
    # events first: the runs point at them
    cur.execute(
        f"{prefix}INSERT INTO scheduler_event (id, topic, event_id, payload, source, received_at, matched, scope,"
        f" team_id) SELECT {event_base} + x, 'topic-' || ({s} % 5), 'ev-' || x,"
        f" '{{\"order\": 1, \"status\": \"confirmed\"}}', 'http', {queued}, 1, '*', NULL"
        f" FROM {source} WHERE {_in(s, EVENTS)}")
    cur.execute(
        f"{prefix}INSERT INTO scheduler_run (id, schedule_id, trigger_key, trigger_kind, logical_time, params,"
        f" priority, workload_class_id, status, attempt, max_attempts, window_low, window_high, rows_loaded,"
        f" watermark_after, queued_at, admitted_at, started_at, finished_at, heartbeat_at, worker_id, dispatch_token,"
        f" error, reason, triggered_by, event_id, stop_kind, stop_reason, propagate)"
        f" SELECT {run_base} + x, {first_schedule} + {s}, 'h:' || x, {kind},"
        f" CASE WHEN {timed} THEN {queued} END, '{{}}', 5, {wc}, {status}, 1, 3, '', '',"
        f" CASE WHEN {h} < 88 THEN (x * 31) % 5000 END, '', {queued},"
        f" CASE WHEN {ran} THEN {queued} END, CASE WHEN {ran} THEN {started} END, {finished},"
        f" CASE WHEN {ran} THEN {finished} END, CASE WHEN {ran} THEN 'etl@host:' || (100 + x % 4) ELSE '' END,"
        f" '', {error}, {reason}, CASE WHEN {_in(s, MANUALS)} THEN 'admin' ELSE '' END,"
        f" CASE WHEN {_in(s, EVENTS)} THEN {event_base} + x END, '', '', {sql.true}"
        f" FROM {source}")


def insert_details(cur, sql: Sql, *, lo: int, hi: int, first_schedule: int) -> None:
    """Node records, log lines and audit entries of the runs with ids lo..hi (already inserted)."""
    workflows = f"r.schedule_id BETWEEN {first_schedule + WORKFLOWS.start} AND {first_schedule + WORKFLOWS.stop - 1}"
    nodes = " UNION ALL ".join(f"SELECT {i + 1}, '{name}'" for i, name in enumerate(NODES))
    cur.execute(
        f"WITH n(k, task) AS ({nodes}) INSERT INTO scheduler_noderecord (run_id, run_attempt, task_id, outcome,"
        f" attempts, resumed, started_at, finished_at, \"rows\", watermark, reason, error)"
        f" SELECT r.id, 1, n.task, CASE WHEN r.status = 'FAILED' AND n.k = {len(NODES)} THEN 'FAILED'"
        f" ELSE 'SUCCESS' END, 1, {sql.false}, r.started_at, r.finished_at, n.k * 100, '',"
        f" CASE WHEN r.status = 'FAILED' AND n.k = {len(NODES)} THEN 'RuntimeError: source unavailable' ELSE '' END,"
        f" '' FROM scheduler_run r CROSS JOIN n WHERE r.id BETWEEN {lo} AND {hi} AND {workflows}"
        f" AND r.started_at IS NOT NULL")
    for every, lines in ((LOG_EVERY, LOG_LINES), (LONG_LOG_EVERY, LONG_LOG_LINES)):
        if every == LONG_LOG_EVERY:
            chosen = f"r.id % {every} = {every // 2}"
        else:
            chosen = f"r.id % {every} = 0 AND r.id % {LONG_LOG_EVERY} != {LONG_LOG_EVERY // 2}"
        cur.execute(
            f"WITH RECURSIVE {sql.small_series('q', lines)} INSERT INTO scheduler_runlogline (run_id, seq, at, level,"
            f" source, message, node) SELECT r.id, q.k, r.finished_at, CASE WHEN q.k % 50 = 0 THEN 'WARNING'"
            f" ELSE 'INFO' END, 'etl.pipeline.orders', 'extracted batch ' || q.k || ' of run ' || r.id"
            f" || ': 5000 rows from orders where updated_at in the window, 5000 upserted into warehouse.orders'"
            f", '' FROM scheduler_run r CROSS JOIN q WHERE r.id BETWEEN {lo} AND {hi} AND {chosen}"
            f" AND r.started_at IS NOT NULL")
    cur.execute(
        f"INSERT INTO scheduler_auditentry (at, actor, actor_kind, action, target_type, target_id, target_repr,"
        f" reason, via, team_id) SELECT r.queued_at,"
        f" CASE WHEN r.status = 'CANCELLED' THEN 'operator' WHEN r.trigger_kind = 'event' THEN 'http'"
        f" ELSE 'admin' END, CASE WHEN r.trigger_kind = 'event' AND r.status != 'CANCELLED' THEN 'api'"
        f" ELSE 'user' END,"
        f" CASE WHEN r.status = 'CANCELLED' THEN 'run.cancel' WHEN r.trigger_kind = 'event' THEN 'event.receive'"
        f" ELSE 'run.trigger' END, 'run', '' || r.id, 'run ' || r.id, r.reason, '', s.owner_id"
        f" FROM scheduler_run r JOIN scheduler_schedule s ON s.id = r.schedule_id"
        f" WHERE r.id BETWEEN {lo} AND {hi}"
        f" AND (r.trigger_kind IN ('manual', 'event') OR r.status = 'CANCELLED')")


def insert_ticks(cur, sql: Sql, *, lo: int, hi: int, total: int, span: int = YEAR) -> None:
    """One governance tick per TICK_EVERY runs, x in lo..hi being the tick numbers."""
    prefix, source = sql.series(lo, hi)
    offset = f"((x - 1) * {TICK_EVERY} * {span} / {total})"
    cur.execute(
        f"{prefix}INSERT INTO scheduler_governancetick (started_at, finished_at, holder, actions, error)"
        f" SELECT {sql.ts(offset)}, {sql.ts(offset)}, 'etl@host:100',"
        f" '{{\"queue\": {{\"queued\": 0, \"waiting\": 0, \"running\": 2}}}}', '' FROM {source}")


def secondary_indexes(cur) -> list[tuple[str, str]]:
    """(name, CREATE statement) of the bulk tables' indexes that no constraint or primary key owns."""
    tables = ", ".join(f"'{t}'" for t in BULK_TABLES)
    if connection.vendor == "postgresql":
        cur.execute(f"SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
                    f" JOIN pg_class t ON t.oid = x.indrelid WHERE t.relname IN ({tables})"
                    f" AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)")
    else:
        cur.execute(f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                    f" AND tbl_name IN ({tables})")
    return list(cur.fetchall())


def generate_history(*, runs: int, now: datetime, progress: Callable[[str], None] = print,
                     chunk: int | None = None, days: int = 365) -> dict:
    """Write the history (module docstring) into the current, migrated, empty-of-history database.

    `days`: the span the runs are spread over, a year by default; fewer days at the same size give the runs per
    hour of a larger history (1,000,000 runs over 37 days: the 10,000,000-run year's 27,000 runs a day)."""
    t0 = time.perf_counter()
    pg = connection.vendor == "postgresql"
    chunk = chunk or (1_000_000 if pg else 200_000)
    first = make_schedules()
    classes = [WorkloadClass.objects.get(name=n).pk for n in ("standard", "heavy", "critical")]
    span = days * 24 * 3600
    sql = Sql(now - timedelta(seconds=span + 900))
    timings: dict[str, float] = {}
    with connection.cursor() as cur:
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM scheduler_run")
        run_base = cur.fetchone()[0]
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM scheduler_event")
        event_base = cur.fetchone()[0]
        cur.execute("SELECT COALESCE(MAX(id), 0) FROM scheduler_auditentry")
        audit_base = cur.fetchone()[0]  # the schedules' own entries, counted as they were written
        indexes = secondary_indexes(cur)
        for name, _ in indexes:
            cur.execute(f'DROP INDEX "{name}"')
        if pg:
            cur.execute("SET session_replication_role = replica")  # no FK trigger per row; the ids are arithmetic
            cur.execute("SET synchronous_commit = off")
        t1 = time.perf_counter()
        for lo in range(1, runs + 1, chunk):
            hi = min(runs, lo + chunk - 1)
            with transaction.atomic():
                insert_runs(cur, sql, lo=lo, hi=hi, total=runs, first_schedule=first, run_base=run_base,
                            event_base=event_base, classes=classes, span=span)
                insert_details(cur, sql, lo=run_base + lo, hi=run_base + hi, first_schedule=first)
                tlo, thi = (lo - 1) // TICK_EVERY + 1, hi // TICK_EVERY
                if thi >= tlo:
                    insert_ticks(cur, sql, lo=tlo, hi=thi, total=runs, span=span)
            progress(f"  {hi:>12,} / {runs:,} runs written ({time.perf_counter() - t1:.0f} s)")
        timings["rows_s"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        for name, create in indexes:
            cur.execute(create)
        progress(f"  {len(indexes)} indexes rebuilt ({time.perf_counter() - t1:.0f} s)")
        timings["indexes_s"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        count_hours_generated(run_base + 1, run_base + runs)  # before ANALYZE: its table's statistics too
        timings["hour_counts_s"] = time.perf_counter() - t1
        progress(f"  hour counts of the timeline written ({timings['hour_counts_s']:.0f} s)")
        t1 = time.perf_counter()
        # the audit report's hourly counts of the entries written above by SQL, as entries written one by one
        # would have kept them (services/audit_counts.py): one INSERT ... SELECT ... GROUP BY
        audit_counts_from_log(after_id=audit_base)
        progress(f"  audit counts ({time.perf_counter() - t1:.0f} s)")
        timings["audit_counts_s"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        if pg:
            cur.execute("SET session_replication_role = DEFAULT")
            for table in BULK_TABLES:
                cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                            f" (SELECT GREATEST(MAX(id), 1) FROM {table}))")
            cur.execute("ANALYZE")
        else:
            cur.execute("ANALYZE")
        timings["analyze_s"] = time.perf_counter() - t1
    tally_generated(run_base + 1, run_base + runs)
    outcomes_rebuild()  # each schedule's latest success and failure, as runs ending one by one would have kept them
    add_live_runs(now, first)
    timings["total_s"] = time.perf_counter() - t0
    progress(f"  history of {runs:,} runs in {timings['total_s']:.0f} s")
    return {"runs": runs, "days": days, "first_schedule": first, **timings, **count_rows()}


def tally_generated(lo: int, hi: int) -> None:
    """The final-status counters that runs ending one by one would have kept (services/tally.py), in one count."""
    counts = (Run.objects.filter(pk__gte=lo, pk__lte=hi, status__in=RunStatus.final()).values_list("status")
              .annotate(n=Count("id")).order_by())
    RunTally.objects.bulk_create([RunTally(status=status, n=n) for status, n in counts])


def count_hours_generated(lo: int, hi: int) -> None:
    """The timeline's hour counts that runs ending one by one would have kept (services/hour_counts.py): one
    INSERT ... SELECT ... GROUP BY over the generated runs, folded already, in the order of the hours."""
    columns = ", ".join(("schedule_id", "hour", "end_hour", *RunHourCount.COLUMNS.values(), "folded"))
    with connection.cursor() as cur:
        cur.execute(f"INSERT INTO {RunHourCount._meta.db_table} ({columns})"
                    f" {count_select('id BETWEEN %s AND %s', folded=True)} ORDER BY 2, 1", [lo, hi, lo, hi])


def add_live_runs(now: datetime, first_schedule: int) -> None:
    """A few QUEUED runs held back by a retry delay: the queue is never empty, and no tick admits them."""
    for i in range(LIVE_RUNS):
        schedule = Schedule.objects.get(pk=first_schedule + CRONS.start + i)
        Run.objects.create(schedule=schedule, trigger_key=f"live:{i}", trigger_kind="retry",
                           workload_class_id=schedule.workload_class_id, status=RunStatus.QUEUED, queued_at=now,
                           attempt=2, max_attempts=3, not_before=now + timedelta(days=30),
                           reason="retry after RuntimeError: source unavailable")


def count_rows() -> dict[str, int]:
    """Rows per bulk table (PostgreSQL: the planner's estimate after ANALYZE, exact enough and instant)."""
    out = {}
    with connection.cursor() as cur:
        for table in BULK_TABLES:
            if connection.vendor == "postgresql":
                cur.execute(f"SELECT reltuples::bigint FROM pg_class WHERE relname = '{table}'")
            else:
                cur.execute(f"SELECT COUNT(*) FROM {table}")
            out[table.removeprefix("scheduler_")] = int(cur.fetchone()[0])
    return out
