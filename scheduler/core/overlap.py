"""Overlap and catch-up policies: what a schedule's fires become. Pure: no Django, no clock.

Overlap (as Temporal's schedules): a cron or interval fire while a run of the
same schedule is still active (queued, waiting or running)

* ``skip``: becomes a SKIPPED run saying which run is active;
* ``buffer_one``: queues behind the active run, at most one such run; more
  fires are skipped;
* ``buffer_all``: queues; the gate runs them one at a time, oldest first;
* ``cancel_other``: asks the active runs to stop (a running one gets the
  grace period to stop by itself) and queues; the new run starts once the old
  one has really stopped;
* ``terminate_other``: as cancel_other, but a running run is killed at once
  (no grace: SIGKILL for a command, the worker process for Python code);
* ``allow_all``: queues; runs overlap freely.

Catch-up: the fires missed while the scheduler was down become one run for
the latest (``latest``), a run each up to a bound (``all``), or no run
(``none``: the latest missed fire is recorded as a SKIPPED run, so the gap is
visible, and the schedule goes on at its next fire).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

SKIP, BUFFER_ONE, BUFFER_ALL, CANCEL_OTHER, ALLOW_ALL = "skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"
TERMINATE_OTHER = "terminate_other"
OVERLAP_POLICIES = (SKIP, BUFFER_ONE, BUFFER_ALL, CANCEL_OTHER, TERMINATE_OTHER, ALLOW_ALL)
LATEST, ALL, NONE = "latest", "all", "none"
#: Policies under which runs of one schedule never run at the same time.
SERIAL_POLICIES = frozenset({SKIP, BUFFER_ONE, BUFFER_ALL, CANCEL_OTHER, TERMINATE_OTHER})


@dataclass(frozen=True)
class ActiveRun:
    id: int
    status: str


@dataclass(frozen=True)
class Fire:
    """One fire time and what it becomes: queued when `skip_reason` is empty, else a SKIPPED run."""

    at: datetime
    skip_reason: str = ""


@dataclass
class OverlapDecision:
    fires: list[Fire]
    cancel: list[int] = field(default_factory=list)  # ids of active runs to cancel first
    cancel_reason: str = ""
    force: bool = False  # terminate_other: a running run is killed at once, without the grace period


def _stamp(at: datetime) -> str:
    return f"{at:%Y-%m-%d %H:%M:%S} UTC"


def decide_overlap(policy: str, active: Sequence[ActiveRun], fires: Sequence[datetime]) -> OverlapDecision:
    """What each of `fires` (oldest first) becomes, given the schedule's active runs (oldest first)."""
    if policy not in OVERLAP_POLICIES:
        raise ValueError(f"unknown overlap policy {policy!r}")
    if policy in (ALLOW_ALL, BUFFER_ALL) or not fires:
        return OverlapDecision([Fire(at) for at in fires])
    if policy in (CANCEL_OTHER, TERMINATE_OTHER):
        last = fires[-1]
        out = [Fire(at, f"overlap policy {policy}: superseded by the fire at {_stamp(last)}") for at in fires[:-1]]
        out.append(Fire(last))
        return OverlapDecision(out, [a.id for a in active],
                               f"overlap policy {policy}: replaced by the fire at {_stamp(last)}",
                               force=policy == TERMINATE_OTHER)
    # skip and buffer_one: fires of this batch count as active once queued
    live = [(f"run {a.id}", a.status) for a in active]
    room = 1 if policy == SKIP else 2
    out = []
    for at in fires:
        if len(live) < room:
            out.append(Fire(at))
            live.append((f"the run for {_stamp(at)}", "QUEUED"))
        elif policy == SKIP:
            out.append(Fire(at, f"overlap policy skip: {live[0][0]} is still {live[0][1]}"))
        else:
            out.append(Fire(at, f"overlap policy buffer_one: {live[0][0]} is still {live[0][1]} and "
                                f"{live[1][0]} already waits its turn"))
    return OverlapDecision(out)


def decide_catchup(policy: str, fires: Sequence[datetime], *, now: datetime, grace: timedelta,
                   first: datetime | None = None) -> list[Fire]:
    """What the due fires (oldest first, already bounded to the latest `max_catchup` or one) become.

    A fire older than `grace` was missed (the scheduler was down or far
    behind). Under ``none`` a missed latest fire becomes a SKIPPED run and no
    run (`first`, the earliest missed fire, goes into its reason); a fire
    within `grace` is on time and runs under every policy.
    """
    if not fires:
        return []
    if policy == NONE:
        latest = fires[-1]
        if now - latest <= grace:
            return [Fire(latest)]
        first = first or fires[0]
        since = f" (and every fire since {_stamp(first)})" if first < latest else ""
        return [Fire(latest, f"catch-up policy none: the fire at {_stamp(latest)} was missed{since}; "
                             "no run, the schedule goes on at its next fire")]
    return [Fire(at) for at in fires]
