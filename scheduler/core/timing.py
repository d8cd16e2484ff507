"""The timing rules between a worker's threads and governance, as constants and checks. Pure: no Django.

Three parties watch a running run: the worker's heartbeat pump (beats every `heartbeat` s, reads stop requests
every `STOP_POLL_SECONDS`), its supervisor (looks every `SUPERVISOR_TICK` s; fences the code of a run it has not
heard the database for since `fence` s), and governance (calls a run lost after `stuck` s without a heartbeat,
and may then give it to another worker). Each rule below is what keeps one copy of a run's code at a time;
`timing_problems` names the one a configuration breaks, and settings refuse to start with any.
"""
from __future__ import annotations

SUPERVISOR_TICK = 0.1  # seconds between the supervisor's looks: the precision of timeouts, graces and fences
STOP_POLL_SECONDS = 1.0  # how often the pump reads its runs' stop requests between two beats
LAST_WORDS_SECONDS = 2.0  # what a worker may spend writing before the supervisor ends its process
# A stopping cluster asks its runs to stop once its grace is over; their workers read the request within a poll,
# kill what ignored it after the cancel grace, and may spend their last words. Past grace + cancel grace + this, the
# cluster kills its whole process tree and writes the runs' ends itself (django-q2's own stop can hang: #346).
SHUTDOWN_KILL_SECONDS = STOP_POLL_SECONDS + LAST_WORDS_SECONDS + 1.0


def shutdown_bound(*, grace: float, cancel_grace: float) -> float:
    """The longest a cluster's stop takes from the signal to the kill of whatever of its tree is left."""
    return grace + cancel_grace + SHUTDOWN_KILL_SECONDS


def fence_grace(*, grace: float, fence: float, stuck: float) -> float:
    """The grace a fenced run's code gets: the cancel grace, but never more than half the gap between the fence
    and the moment governance may call the run lost."""
    return min(grace, max(0.0, (stuck - fence) / 2))


def timing_problems(*, fence: float, stuck: float, grace: float) -> list[str]:
    """The rules a configuration breaks (empty: none). Settings refuse to start with any."""
    problems = []
    if not SUPERVISOR_TICK < STOP_POLL_SECONDS:
        problems.append("the supervisor must look more often than the pump polls, or a stop waits a whole tick")
    if not fence < stuck:
        problems.append(f"ETL_FENCE_SECONDS: must be less than ETL_STUCK_SECONDS ({stuck:g}), got {fence:g}: a worker "
                        "that cannot reach the database must stop its code before governance may give the run away")
    elif fence_grace(grace=grace, fence=fence, stuck=stuck) + SUPERVISOR_TICK > stuck - fence:
        problems.append("ETL_FENCE_SECONDS: a fenced run's grace must end inside the gap between the fence and "
                        f"ETL_STUCK_SECONDS ({stuck - fence:g} s)")
    return problems


__all__ = ["LAST_WORDS_SECONDS", "SHUTDOWN_KILL_SECONDS", "STOP_POLL_SECONDS", "SUPERVISOR_TICK", "fence_grace",
           "shutdown_bound", "timing_problems"]
