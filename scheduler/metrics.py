"""Prometheus metrics read from the database at scrape time.

A custom collector (not counters kept in process memory) because the web
process that answers the scrape is not the one running the work: the truth is
in the database, shared by every cluster.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from scheduler.models import BreakerStatus, GovernanceTick, Run, RunStatus, Schedule, Team, WorkloadClass
from scheduler.services.oversight.freshness import freshness_status
from scheduler.services.integrations.lineage_send import lineage_backlog
from scheduler.services.history.prune import history_status
from scheduler.services.history.tally import tally_totals

DURATION_BUCKETS = (0.1, 0.5, 1, 5, 15, 30, 60, 300, 900, 1800, 3600, float("inf"))
LATENCY_BUCKETS = (0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, float("inf"))
RECENT = timedelta(hours=1)


def _histogram(name: str, doc: str, values: list[float], buckets) -> HistogramMetricFamily:
    counts = []
    for bound in buckets:
        counts.append((_le(bound), sum(1 for v in values if v <= bound)))
    total = sum(values)
    return HistogramMetricFamily(name, doc, buckets=counts, sum_value=total)


def _le(bound: float) -> str:
    return floatToGoString(bound)


class SchedulerCollector(Collector):
    def __init__(self, clock=timezone.now) -> None:
        self.clock = clock

    def collect(self):
        now: datetime = self.clock()
        classes = list(WorkloadClass.objects.order_by("name"))
        # every schedule once (teams, breakers, the owner of each run), the active runs once (an index range of
        # the few of them, by class, schedule and status), the last hour's ends once (run_finished_at_idx): never
        # a count of the ledger (issue 25), and one query for what four or five used to read
        schedules = list(Schedule.objects.order_by().values_list("pk", "owner_id", "breaker_status"))
        owner_of = {pk: owner for pk, owner, _ in schedules}
        active = list(Run.objects.filter(status__in=RunStatus.active()).order_by()
                      .values_list("workload_class_id", "schedule_id", "status")
                      .annotate(n=Count("id"), stopping=Count("id", filter=Q(stop_requested_at__isnull=False))))
        per_class: Counter = Counter()
        for wc_id, _schedule_id, status, n, _stopping in active:
            per_class[(wc_id, status)] += n
        depth = GaugeMetricFamily(
            "etl_queue_depth", "Runs per workload class and active status.", labels=["workload_class", "status"]
        )
        limit = GaugeMetricFamily(
            "etl_workload_class_limit", "Concurrency limit of each workload class.", labels=["workload_class"]
        )
        for wc in classes:
            limit.add_metric([wc.name], wc.concurrency_limit)
            for status in (RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING):
                depth.add_metric([wc.name, status.value], per_class.get((wc.pk, status), 0))
        yield depth
        yield limit

        # Never a count of the whole ledger (issue 25): the live statuses from the query above (an index range
        # of the few active runs), the final ones from counters kept as runs end (services/tally.py).
        runs = GaugeMetricFamily("etl_runs", "Runs by active status (QUEUED, WAITING, RUNNING).", labels=["status"])
        for status in (RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING):
            runs.add_metric([status.value], sum(n for (_wc, st), n in per_class.items() if st == status))
        yield runs
        finished = CounterMetricFamily("etl_runs_finished", "Runs that ended, by final status, since the counters "
                                       "began (pruned runs stay counted).", labels=["status"])
        for status, n in tally_totals().items():
            finished.add_metric([status], n)
        yield finished
        yield GaugeMetricFamily(
            "etl_runs_stopping", "RUNNING runs asked to stop (cancel, timeout, fence) whose work has not ended yet.",
            value=sum(stopping for _wc, _s, status, _n, stopping in active if status == RunStatus.RUNNING),
        )

        ended = list(
            # no ordering: ordered by id, SQLite walked the primary key instead of run_finished_at_idx
            Run.objects.filter(finished_at__gte=now - RECENT).order_by().values_list(
                "schedule_id", "status", "queued_at", "started_at", "finished_at"
            )
        )
        recent = [(q, s, f) for _id, _st, q, s, f in ended if s is not None]
        durations = [max((f - s).total_seconds(), 0.0) for _q, s, f in recent if f]
        latencies = [max((s - q).total_seconds(), 0.0) for q, s, _f in recent]
        yield _histogram(
            "etl_run_duration_seconds", "Duration of runs finished in the last hour.", durations, DURATION_BUCKETS
        )
        yield _histogram(
            "etl_run_start_latency_seconds",
            "Queued-to-started latency of runs finished in the last hour.",
            latencies,
            LATENCY_BUCKETS,
        )

        breakers = GaugeMetricFamily("etl_breakers", "Circuit breakers by state.", labels=["state"])
        states = Counter(state for _pk, _owner, state in schedules)
        for state in BreakerStatus:
            breakers.add_metric([state.value], states.get(state.value, 0))
        yield breakers

        yield from self.team_metrics(now, schedules=schedules, active=active,
                                     ended=[(owner_of.get(sid), status) for sid, status, *_ in ended])

        tick = GovernanceTick.objects.order_by("-started_at").values_list("started_at", flat=True).first()
        age = GaugeMetricFamily(
            "etl_governance_tick_age_seconds", "Seconds since the governance loop last ticked (-1: never)."
        )
        age.add_metric([], (now - tick).total_seconds() if tick else -1)
        yield age
        interval = GaugeMetricFamily("etl_governance_interval_seconds", "Configured governance interval.")
        interval.add_metric([], settings.ETL_GOVERNANCE_INTERVAL)
        yield interval

        yield from self._lineage(now)
        yield from self._freshness(now)
        yield from self._retention(now)

    def _retention(self, now: datetime):
        """Whether the prune keeps up (docs/semantics.md, Retention)."""
        status = history_status(now)
        yield GaugeMetricFamily("etl_history_oldest_run_age_seconds",
                                "Age of the oldest run in the ledger (0: none); stays near the runs' retention "
                                "when the prune keeps up.", value=status["oldest_run_age_seconds"])
        yield GaugeMetricFamily("etl_history_last_prune_age_seconds",
                                "Seconds since the latest prune that deleted rows (-1: none yet).",
                                value=status["last_prune_age_seconds"])
        pruned = GaugeMetricFamily("etl_history_pruned_rows", "Rows the latest prune deleted, by kind.",
                                   labels=["kind"])
        for kind, n in status["last_prune"].items():
            pruned.add_metric([kind], n)
        yield pruned

    def _lineage(self, now: datetime):
        """The OpenLineage outbox's backlog (docs/lineage.md): what waits to be sent, and what was given up."""
        backlog = lineage_backlog(now=now)
        yield GaugeMetricFamily("etl_lineage_outbox_pending", "OpenLineage events in the outbox not sent yet.",
                                value=backlog["pending"])
        yield GaugeMetricFamily("etl_lineage_outbox_dead",
                                "OpenLineage events given up after ETL_LINEAGE_MAX_ATTEMPTS tries.",
                                value=backlog["dead"])
        yield GaugeMetricFamily("etl_lineage_outbox_oldest_pending_seconds",
                                "Age of the oldest OpenLineage event not sent yet (0: none).",
                                value=backlog["oldest_pending_seconds"])

    def _freshness(self, now: datetime):
        """Per schedule with a freshness objective: the data's age, the objective, and whether it is breached."""
        age = GaugeMetricFamily("etl_freshness_age_seconds",
                                "Age of each schedule's data (last success or watermark lag).",
                                labels=["schedule", "measure"])
        objective = GaugeMetricFamily("etl_freshness_objective_seconds", "Each schedule's freshness objective.",
                                      labels=["schedule"])
        breached = GaugeMetricFamily("etl_freshness_breached",
                                     "1 while governance holds the schedule's freshness objective breached.",
                                     labels=["schedule"])
        for row in freshness_status(now=now):
            name = row.schedule.name
            age.add_metric([name, row.measure], row.freshness.age.total_seconds())
            objective.add_metric([name], row.freshness.objective.total_seconds())
            breached.add_metric([name], 1 if row.schedule.freshness_breached_at else 0)
        yield age
        yield objective
        yield breached

    def team_metrics(self, now: datetime, *, schedules: list[tuple], active: list[tuple], ended: list[tuple]):
        """The same picture per owning team (label `team`), so each team can alert on its own schedules, from
        what `collect` read: (schedule, owner, breaker state), the active runs by (class, schedule, status) and
        the last hour's ends as (owner, status)."""
        teams = dict(Team.objects.values_list("pk", "name"))
        by_name = sorted(teams.items(), key=lambda item: item[1])
        owner_of = {pk: owner for pk, owner, _ in schedules}
        gauge = GaugeMetricFamily("etl_team_schedules", "Schedules owned by each team.", labels=["team"])
        owned = Counter(owner for _pk, owner, _state in schedules)
        for pk, name in by_name:
            gauge.add_metric([name], owned.get(pk, 0))
        yield gauge

        gauge = GaugeMetricFamily(
            "etl_team_active_runs",
            "Queued, waiting and running runs of each team's schedules.",
            labels=["team", "status"],
        )
        counts: Counter = Counter()
        for _wc, schedule_id, status, n, _stopping in active:
            counts[(owner_of.get(schedule_id), status)] += n
        for pk, name in by_name:
            for status in (RunStatus.QUEUED, RunStatus.WAITING, RunStatus.RUNNING):
                gauge.add_metric([name, status.value], counts.get((pk, status.value), 0))
        yield gauge

        gauge = GaugeMetricFamily(
            "etl_team_finished_runs_recent",
            "Runs of each team's schedules that ended in the last hour, by status.",
            labels=["team", "status"],
        )
        counts = Counter(ended)
        for pk, name in by_name:
            for status in sorted(RunStatus.final()):
                gauge.add_metric([name, status], counts.get((pk, status), 0))
        yield gauge

        gauge = GaugeMetricFamily("etl_team_breakers", "Circuit breakers of each team's schedules by state.",
                                  labels=["team", "state"])
        states = Counter((owner, state) for _pk, owner, state in schedules)
        for pk, name in by_name:
            for state in BreakerStatus:
                gauge.add_metric([name, state.value], states.get((pk, state.value), 0))
        yield gauge


def render_metrics(clock=timezone.now) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SchedulerCollector(clock))
    return generate_latest(registry)
