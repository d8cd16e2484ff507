"""Dependencies between schedules: conditions, failure gating, cycles."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from scheduler.core import find_all_cycles, would_create_cycle
from scheduler.models import CATCHUP_SKIP_REASON, OVERLAP_SKIP_REASON, Condition, Run, RunStatus, Schedule

SUCCESSISH = {RunStatus.SUCCEEDED, RunStatus.SKIPPED}
# a fire its overlap or catch-up policy did not run is not an outcome of the upstream
NOT_RUN = Q(status=RunStatus.SKIPPED) & (Q(reason__startswith=OVERLAP_SKIP_REASON)
                                         | Q(reason__startswith=CATCHUP_SKIP_REASON))
FAILISH = {RunStatus.FAILED, RunStatus.BLOCKED}


@dataclass(frozen=True)
class Verdict:
    """admit, wait or block; for block, `upstream` names the culprit."""

    action: str
    reason: str = ""
    upstream: Schedule | None = None


def upstream_states(schedule: Schedule) -> list[tuple[Schedule, str | None, int | None]]:
    """(upstream, status of its latest live run or None, run id) for each upstream."""
    out = []
    for upstream in schedule.depends_on.all().order_by("name"):
        latest = (
            Run.objects.filter(schedule=upstream, backfill__isnull=True)
            .exclude(status=RunStatus.CANCELLED)
            .exclude(NOT_RUN)
            .order_by("-id")
            .values_list("status", "id")
            .first()
        )
        out.append((upstream, latest[0] if latest else None, latest[1] if latest else None))
    return out


def evaluate(schedule: Schedule) -> Verdict:
    """May a run of `schedule` start given its upstreams' latest runs?"""
    states = upstream_states(schedule)
    if not states:
        return Verdict("admit")
    ok = [u for u, s, _ in states if s in SUCCESSISH]
    failed = [(u, s, rid) for u, s, rid in states if s in FAILISH]
    done = [u for u, s, _ in states if s in RunStatus.final()]
    pending = [u for u, s, _ in states if s not in RunStatus.final()]
    cond = schedule.condition

    def blocked() -> Verdict:
        u, s, rid = failed[0]
        word = "failed" if s == RunStatus.FAILED else "was blocked"
        return Verdict("block", f"upstream '{u.name}' {word} (run {rid})", u)

    def waiting(names: list[Schedule]) -> Verdict:
        return Verdict("wait", "waiting for upstream " + ", ".join(f"'{u.name}'" for u in names) + f" ({cond})")

    if cond == Condition.ALL_SUCCESS:
        if failed:
            return blocked()
        return Verdict("admit") if len(ok) == len(states) else waiting(pending)
    if cond == Condition.ANY_SUCCESS:
        if ok:
            return Verdict("admit")
        if len(failed) == len(states):
            return blocked()
        return waiting(pending)
    if cond == Condition.NONE_FAILED:
        if failed:
            return blocked()
        return Verdict("admit") if not pending else waiting(pending)
    # ALL_DONE: whatever the outcome, once everything has finished
    return Verdict("admit") if len(done) == len(states) else waiting(pending)


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
