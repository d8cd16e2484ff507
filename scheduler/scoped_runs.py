"""A team's runs that stand for another team's, as a reader whose viewing is scoped sees them (issue 33).

With ETL_TEAMS_VIEW_ALL off, a run of one's own team may still have been triggered, joined or blocked by a run of
another team's schedule. Its `triggered_by` ("upstream:NAME"), `trigger_key` ("upstream:ID", "blocked:ID"),
`reason` ("upstream 'NAME' failed (run ID); root cause: 'NAME' failed (run ID)"), `blocked_by` and its upstream
links would name that schedule, its run and that run's status. For such a reader they read "(a schedule of
another team)" / "(a run of another team)", with no status: on the pages and in the API alike. The rows are
changed in memory only (the ledger keeps what happened); an admin, or anyone while viewing is not scoped, sees
them as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db.models import Q

from scheduler.models import Run, Schedule

HIDDEN_SCHEDULE = "(a schedule of another team)"
HIDDEN_RUN = "(a run of another team)"
_QUOTED = re.compile(r"'([^'\n]{1,200})'")
_KEY = re.compile(r"^(upstream|blocked):(\d+)$")
UPSTREAM = "upstream:"


def _loaded(run: Run, field: str) -> bool:
    # a list's rows load a few columns (run_reads.RUN_LIST_FIELDS): reading another would cost a query a row
    return field not in run.get_deferred_fields()


def _hider(names: set[str]):
    """A function that rewrites text naming any of `names` (another team's schedules) without them."""
    if not names:
        return lambda text: text
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    # "'NAME' failed (run 12)": the name, what became of its run and the run's id go; that the run did not
    # succeed is already told by the reader's own run being blocked
    ended = re.compile(rf"'(?:{alternatives})'(?: [a-z][a-z ]*?)? \(run \d+\)")
    named = re.compile(rf"'(?:{alternatives})'(?: \(no run yet\))?")

    def hide(text: str) -> str:
        text = ended.sub(f"{HIDDEN_SCHEDULE} did not succeed", text)
        return named.sub(HIDDEN_SCHEDULE, text)

    return hide


def hide_other_teams(runs: Iterable[Run], team_ids: frozenset[int] | None) -> list[Run]:
    """`runs` as a reader who may see only `team_ids` sees them (None: every team, unchanged); two queries at most
    for any number of runs. Sets `hidden_blocker` on a run blocked by another team's schedule."""
    runs = list(runs)
    if team_ids is None or not runs:
        return runs
    names: set[str] = set()
    blockers: set[int] = set()
    run_ids: set[int] = set()
    for run in runs:
        if _loaded(run, "reason"):
            names.update(_QUOTED.findall(run.reason or ""))
        if _loaded(run, "triggered_by") and (run.triggered_by or "").startswith(UPSTREAM):
            names.add(run.triggered_by[len(UPSTREAM) :])
        if _loaded(run, "blocked_by_id") and run.blocked_by_id and run.blocked_by_id != run.schedule_id:
            blockers.add(run.blocked_by_id)
        key = _KEY.match(run.trigger_key or "") if _loaded(run, "trigger_key") else None
        if key:
            run_ids.add(int(key.group(2)))
    hidden_names: set[str] = set()
    hidden_blockers: set[int] = set()
    if names or blockers:
        for pk, name in (
            Schedule.objects.filter(Q(name__in=names) | Q(pk__in=blockers))
            .exclude(owner_id__in=team_ids)
            .values_list("pk", "name")
        ):
            hidden_names.add(name)
            hidden_blockers.add(pk)
    hidden_runs = (
        set(Run.objects.filter(pk__in=run_ids).exclude(schedule__owner_id__in=team_ids).values_list("pk", flat=True))
        if run_ids
        else set()
    )
    hide = _hider(hidden_names)
    for run in runs:
        if _loaded(run, "reason") and run.reason:
            run.reason = hide(run.reason)
        if (
            _loaded(run, "triggered_by")
            and (run.triggered_by or "").startswith(UPSTREAM)
            and run.triggered_by[len(UPSTREAM) :] in hidden_names
        ):
            run.triggered_by = UPSTREAM + HIDDEN_SCHEDULE
        key = _KEY.match(run.trigger_key or "") if _loaded(run, "trigger_key") else None
        if key and int(key.group(2)) in hidden_runs:
            run.trigger_key = f"{key.group(1)}:{HIDDEN_RUN}"
        run.hidden_blocker = _loaded(run, "blocked_by_id") and run.blocked_by_id in hidden_blockers
    return runs


def hide_in_text(text: str, team_ids: frozenset[int] | None) -> str:
    """Free text about a run (why it waits) with another team's schedule names and run ids hidden; one query."""
    if team_ids is None or not text:
        return text
    names = set(_QUOTED.findall(text))
    hidden = (
        set(Schedule.objects.filter(name__in=names).exclude(owner_id__in=team_ids).values_list("name", flat=True))
        if names
        else set()
    )
    return _hider(hidden)(text)


def hide_upstream_rows(rows: list[dict], team_ids: frozenset[int] | None) -> list[dict]:
    """The run page's "stands for these upstream runs" rows: another team's schedule with no name, run or status."""
    for row in rows:
        row["hidden"] = team_ids is not None and row["schedule"].owner_id not in team_ids
        if row["hidden"]:
            row["run"] = None
    return rows


__all__ = ["HIDDEN_RUN", "HIDDEN_SCHEDULE", "hide_in_text", "hide_other_teams", "hide_upstream_rows"]
