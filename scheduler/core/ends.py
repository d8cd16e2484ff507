"""How a run ends, as data: the kinds of end, which one wins over which, and what each becomes. Pure: no Django.

A run can be ended by its own code (the *verdict*), by a request to stop it (a person's cancel, an overlap
policy's `cancel_other`, a forced stop, its timeout, a fence, the cluster's shutdown), by governance when its
worker is gone (*lost*), or before it ever starts (*refused*: blocked, skipped, or a dependency timeout).

Several of these can meet on one run: a person cancels while the supervisor has already found the timeout; the
code returns its verdict a moment after a cancel was asked; governance finds the worker gone while the row holds a
stop request. `WINS` says which end stands, and the one writer of a run's end (scheduler/services/runs/end.py)
guards its compare-and-set with it: the row may hold only a stop request that the end outranks or equals. When
the row holds a stronger request, that request's end is written instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EndKind(StrEnum):
    VERDICT = "verdict"  # the code's own outcome: SUCCEEDED, FAILED (retryable or not), SKIPPED
    REFUSED = "refused"  # never began: BLOCKED, SKIPPED, FAILED (dependency timeout), or a cancel before the start
    LOST = "lost"  # governance: the worker is gone (no heartbeat)
    FENCE = "fence"  # the worker lost the database and stopped the code itself
    SHUTDOWN = "shutdown"  # the cluster stopped: back to the queue without spending an attempt
    TIMEOUT = "timeout"  # past timeout_seconds: FAILED "timed out", retried while attempts last
    CANCEL_OTHER = "cancel_other"  # an overlap policy replaced it with a newer fire
    CANCEL = "cancel"  # a person cancelled it
    TERMINATE = "terminate"  # a forced stop (kill now, no grace)


# The kinds of stop request a RUNNING run's row can hold (its `stop_kind`; "" = none).
STOP_KINDS = (EndKind.FENCE, EndKind.SHUTDOWN, EndKind.TIMEOUT, EndKind.CANCEL_OTHER, EndKind.CANCEL,
              EndKind.TERMINATE)
NO_STOP = ""

# Which end wins over which: a higher rank stands. A person's decision outranks the machine's (a cancel wins over a
# timeout that was still local, so the cancel is never erased by a retry); any stop request outranks the code's
# verdict (nothing the code did after the request counts); a lost worker's end yields to any stop request the row
# holds (a cancelled run whose worker died is CANCELLED, not re-queued).
WINS: dict[str, int] = {
    EndKind.VERDICT: 0,
    EndKind.REFUSED: 0,
    EndKind.LOST: 1,
    EndKind.FENCE: 1,
    EndKind.SHUTDOWN: 2,
    EndKind.TIMEOUT: 3,
    EndKind.CANCEL_OTHER: 4,
    EndKind.CANCEL: 4,
    EndKind.TERMINATE: 5,
}


def outranks(new: str, pending: str) -> bool:
    """May a stop request `new` replace the request `pending` on the row ("" = none)?"""
    return pending == NO_STOP or WINS[new] > WINS[pending]


def replaceable_by(new: str) -> tuple[str, ...]:
    """The `stop_kind` values a new stop request `new` may overwrite: the guard of a stop request's update."""
    return (NO_STOP, *(kind.value for kind in STOP_KINDS if WINS[new] > WINS[kind]))


def yields_to(kind: str) -> tuple[str, ...]:
    """The `stop_kind` values a row may hold for an end of `kind` to be written: none, or a request it does not
    lose to. The guard of every end's compare-and-set."""
    return (NO_STOP, *(stop.value for stop in STOP_KINDS if WINS[stop] <= WINS[kind]))


def prevailing(kind: str, pending: str) -> str:
    """The end that stands when an end of `kind` meets the row's pending stop request."""
    if pending == NO_STOP or WINS[kind] >= WINS[pending]:
        return kind
    return pending


class Next(StrEnum):
    FINAL = "final"  # the run ends with a final status
    RETRY = "retry"  # back to the queue after back-off, spending an attempt
    REQUEUE = "requeue"  # back to the queue now, spending an attempt (a lost worker)
    REQUEUE_FREE = "requeue_free"  # back to the queue now, the attempt not spent (the cluster stopped)


@dataclass(frozen=True)
class Plan:
    next: Next
    status: str  # the final status ("" when the run goes back to the queue)


def plan(kind: str, *, status: str = "", retryable: bool = False, attempts_left: bool) -> Plan:
    """What an end of `kind` makes of the run. `status`: the verdict's or the refusal's own status."""
    if kind in (EndKind.CANCEL, EndKind.CANCEL_OTHER, EndKind.TERMINATE):
        return Plan(Next.FINAL, "CANCELLED")
    if kind == EndKind.SHUTDOWN:
        return Plan(Next.REQUEUE_FREE, "")
    if kind == EndKind.TIMEOUT:
        return Plan(Next.RETRY, "") if attempts_left else Plan(Next.FINAL, "FAILED")
    if kind in (EndKind.LOST, EndKind.FENCE):
        return Plan(Next.REQUEUE, "") if attempts_left else Plan(Next.FINAL, "FAILED")
    if not status:
        raise ValueError(f"an end of kind {kind!r} needs its status")
    if kind == EndKind.VERDICT and status == "FAILED" and retryable and attempts_left:
        return Plan(Next.RETRY, "")
    return Plan(Next.FINAL, status)


__all__ = ["NO_STOP", "STOP_KINDS", "WINS", "EndKind", "Next", "Plan", "outranks", "plan", "prevailing",
           "replaceable_by", "yields_to"]
