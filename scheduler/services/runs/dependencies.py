"""Dependencies between schedules: which upstream runs a run stands for, conditions, cycles."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.db.models.functions import Coalesce

from scheduler.core import find_all_cycles, would_create_cycle
from scheduler.models import CATCHUP_SKIP_REASON, OVERLAP_SKIP_REASON, Condition, Run, RunStatus, RunUpstream, Schedule

SUCCESSISH = {RunStatus.SUCCEEDED, RunStatus.SKIPPED}
# a fire its overlap or catch-up policy did not run is not an outcome of the upstream
NOT_RUN = Q(status=RunStatus.SKIPPED) & (Q(reason__startswith=OVERLAP_SKIP_REASON)
                                         | Q(reason__startswith=CATCHUP_SKIP_REASON))
FAILISH = {RunStatus.FAILED, RunStatus.BLOCKED}


@dataclass(frozen=True)
class Match:
    """The upstream run a downstream run stands for, for one upstream schedule (run_id None: none yet)."""

    upstream: Schedule
    run_id: int | None = None
    status: str | None = None
    pinned: bool = False  # the run that triggered it, rather than one matched by logical time


@dataclass(frozen=True)
class Verdict:
    """admit, wait or block; for block, `upstream` names the culprit; `matches` says which runs were judged."""

    action: str
    reason: str = ""
    upstream: Schedule | None = None
    matches: tuple[Match, ...] = ()


@dataclass(frozen=True)
class Subject:
    """A downstream run to judge (saved or about to be created)."""

    key: Any  # the run id, or any key for a run not created yet
    schedule: Schedule
    logical_time: datetime
    pins: dict[int, tuple[int, str]] = field(default_factory=dict)  # upstream schedule id -> (run id, status)


def logical_time_of(run: Run) -> datetime:
    return run.logical_time or run.queued_at


def judge(schedule: Schedule, matches: list[Match]) -> Verdict:
    """The condition applied to the matched upstream runs (pure: no query)."""
    found = tuple(matches)
    if not matches:
        return Verdict("admit", matches=found)
    ok = [m for m in matches if m.status in SUCCESSISH]
    failed = [m for m in matches if m.status in FAILISH]
    done = [m for m in matches if m.status in RunStatus.final()]
    pending = [m for m in matches if m.status not in RunStatus.final()]
    cond = schedule.condition

    def blocked() -> Verdict:
        m = failed[0]
        word = "failed" if m.status == RunStatus.FAILED else "was blocked"
        return Verdict("block", f"upstream '{m.upstream.name}' {word} (run {m.run_id})", m.upstream, found)

    def waiting(items: list[Match]) -> Verdict:
        names = ", ".join(f"'{m.upstream.name}'" + ("" if m.run_id else " (no run yet)") for m in items)
        return Verdict("wait", f"waiting for upstream {names} ({cond})", None, found)

    if cond == Condition.ALL_SUCCESS:
        if failed:
            return blocked()
        return Verdict("admit", matches=found) if len(ok) == len(matches) else waiting(pending)
    if cond == Condition.ANY_SUCCESS:
        if ok:
            return Verdict("admit", matches=found)
        if len(failed) == len(matches):
            return blocked()
        return waiting(pending)
    if cond == Condition.NONE_FAILED:
        if failed:
            return blocked()
        return Verdict("admit", matches=found) if not pending else waiting(pending)
    # ALL_DONE: whatever the outcome, once everything has finished
    return Verdict("admit", matches=found) if len(done) == len(matches) else waiting(pending)


def subjects_for(runs: list[Run]) -> list[Subject]:
    """Saved runs as subjects, with their pinned upstream runs (one query for all of them)."""
    pins: dict[int, dict[int, tuple[int, str]]] = defaultdict(dict)
    for run_id, upstream_id, upstream_run_id, status in RunUpstream.objects.filter(
        run_id__in=[r.pk for r in runs], pinned=True, upstream_run__isnull=False
    ).values_list("run_id", "upstream_schedule_id", "upstream_run_id", "upstream_run__status"):
        pins[run_id][upstream_id] = (upstream_run_id, status)
    return [Subject(r.pk, r.schedule, logical_time_of(r), pins.get(r.pk, {})) for r in runs]


def verdicts(subjects: list[Subject]) -> dict[Any, Verdict]:
    """One verdict per subject, with a fixed number of queries per schedule, however many runs wait.

    Matching rule: for each upstream, the pinned run if there is one (the run
    that triggered the downstream run); else the latest live run of the
    upstream (not a backfill window, not cancelled, not a fire its overlap or
    catch-up policy skipped) whose logical time is not
    after the downstream run's and not older than its schedule's
    `max_upstream_age_seconds`.
    """
    out: dict[Any, Verdict] = {}
    by_schedule: dict[int, list[Subject]] = defaultdict(list)
    for subject in subjects:
        by_schedule[subject.schedule.pk].append(subject)
    for group in by_schedule.values():
        schedule = group[0].schedule
        upstreams = list(schedule.depends_on.all().order_by("name"))
        if not upstreams:
            out.update((s.key, Verdict("admit")) for s in group)
            continue
        age = timedelta(seconds=schedule.max_upstream_age_seconds)
        low = min(s.logical_time for s in group) - age
        high = max(s.logical_time for s in group)
        candidates: dict[int, list[tuple[datetime, int, str]]] = defaultdict(list)
        rows = (
            Run.objects.filter(schedule_id__in=[u.pk for u in upstreams], backfill__isnull=True)
            .exclude(status=RunStatus.CANCELLED)
            .exclude(NOT_RUN)
            .annotate(at=Coalesce("logical_time", "queued_at"))
            .filter(at__gte=low, at__lte=high)
            .values_list("schedule_id", "at", "id", "status")
        )
        for upstream_id, at, run_id, status in rows:
            candidates[upstream_id].append((at, run_id, status))
        for upstream_id in candidates:
            candidates[upstream_id].sort()
        for subject in group:
            matches = []
            for upstream in upstreams:
                pinned = subject.pins.get(upstream.pk)
                if pinned is not None:
                    matches.append(Match(upstream, pinned[0], pinned[1], pinned=True))
                    continue
                found = _latest_in(candidates.get(upstream.pk, []), subject.logical_time - age, subject.logical_time)
                matches.append(Match(upstream, found[1], found[2]) if found else Match(upstream))
            out[subject.key] = judge(schedule, matches)
    return out


def _latest_in(rows: list[tuple[datetime, int, str]], low: datetime, high: datetime):
    """The last (logical time, id) row inside [low, high], rows sorted ascending."""
    for row in reversed(rows):
        if row[0] <= high:
            return row if row[0] >= low else None
    return None


def verdict_for(run: Run) -> Verdict:
    """The verdict of one saved run (pages, `explain_wait`)."""
    return verdicts(subjects_for([run]))[run.pk]


def record_matches(run: Run, verdict: Verdict) -> None:
    """Store which upstream runs `run` was judged on (kept: the first record of an upstream wins)."""
    rows = [
        RunUpstream(run=run, upstream_schedule=m.upstream, upstream_run_id=m.run_id, pinned=m.pinned)
        for m in verdict.matches
    ]
    if rows:
        RunUpstream.objects.bulk_create(rows, ignore_conflicts=True)


def pin(run: Run, upstream_run: Run) -> None:
    """`run` stands for `upstream_run` (it was triggered by it, or joined by it while waiting)."""
    RunUpstream.objects.bulk_create(
        [RunUpstream(run=run, upstream_schedule_id=upstream_run.schedule_id, upstream_run=upstream_run, pinned=True)],
        ignore_conflicts=True,
    )


def dependency_graph() -> dict[str, list[str]]:
    """name -> upstream names, for every schedule."""
    graph: dict[str, list[str]] = {name: [] for name in Schedule.objects.values_list("name", flat=True)}
    through = Schedule.depends_on.through
    names = dict(Schedule.objects.values_list("id", "name"))
    for from_id, to_id in through.objects.values_list("from_schedule_id", "to_schedule_id"):
        graph[names[from_id]].append(names[to_id])
    return graph


# Cycles are spelled in the direction data flows, upstream -> dependent, as
# in "a -> b" for "b depends on a"; the graph walks upstream links, hence
# the reversals.

def cycle_for(name: str, upstream_names: list[str]) -> list[str] | None:
    """The cycle giving `name` these upstreams would close, e.g. ['a', 'b', 'c', 'a'], or None."""
    graph = dependency_graph()
    graph.setdefault(name, [])
    cycle = would_create_cycle(graph, name, upstream_names)
    return list(reversed(cycle)) if cycle else None


def all_cycles() -> list[list[str]]:
    """One cycle per tangle of schedules, each starting and ending at the same name."""
    return [list(reversed(cycle)) for cycle in find_all_cycles(dependency_graph())]
