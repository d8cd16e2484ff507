"""The table of which end wins over which (scheduler/core/ends.py): pure, no database."""
from __future__ import annotations

import pytest

from scheduler.core.ends import (NO_STOP, STOP_KINDS, WINS, EndKind, Next, outranks, plan, prevailing, replaceable_by,
                                 yields_to)


def test_a_persons_decision_outranks_the_machines():
    assert WINS[EndKind.TERMINATE] > WINS[EndKind.CANCEL] == WINS[EndKind.CANCEL_OTHER] > WINS[EndKind.TIMEOUT]
    assert WINS[EndKind.TIMEOUT] > WINS[EndKind.SHUTDOWN] > WINS[EndKind.FENCE] == WINS[EndKind.LOST]
    assert WINS[EndKind.LOST] > WINS[EndKind.VERDICT] == WINS[EndKind.REFUSED]


def test_every_kind_has_a_rank():
    assert set(WINS) == set(EndKind)


@pytest.mark.parametrize("new, pending, replaces", [
    (EndKind.CANCEL, NO_STOP, True), (EndKind.CANCEL, EndKind.TIMEOUT, True),
    (EndKind.CANCEL_OTHER, EndKind.TIMEOUT, True), (EndKind.TIMEOUT, EndKind.CANCEL, False),
    (EndKind.CANCEL, EndKind.CANCEL_OTHER, False), (EndKind.TERMINATE, EndKind.CANCEL, True),
    (EndKind.CANCEL, EndKind.CANCEL, False), (EndKind.SHUTDOWN, EndKind.TIMEOUT, False),
])
def test_a_request_replaces_only_a_weaker_one(new, pending, replaces):
    assert outranks(new, pending) is replaces
    assert (pending in replaceable_by(new)) is replaces


def test_an_end_is_written_only_over_requests_it_does_not_lose_to():
    assert yields_to(EndKind.VERDICT) == (NO_STOP,)  # any stop outranks the code's own verdict
    assert set(yields_to(EndKind.LOST)) == {NO_STOP, EndKind.FENCE}
    assert EndKind.CANCEL not in yields_to(EndKind.TIMEOUT)
    assert set(yields_to(EndKind.TERMINATE)) == {NO_STOP, *STOP_KINDS}


def test_the_stronger_end_prevails_either_way_round():
    assert prevailing(EndKind.TIMEOUT, EndKind.CANCEL) == EndKind.CANCEL
    assert prevailing(EndKind.CANCEL, EndKind.TIMEOUT) == EndKind.CANCEL
    assert prevailing(EndKind.VERDICT, NO_STOP) == EndKind.VERDICT
    assert prevailing(EndKind.LOST, EndKind.TIMEOUT) == EndKind.TIMEOUT


@pytest.mark.parametrize("kind, status, retryable, left, expected", [
    (EndKind.VERDICT, "SUCCEEDED", False, True, (Next.FINAL, "SUCCEEDED")),
    (EndKind.VERDICT, "FAILED", True, True, (Next.RETRY, "")),
    (EndKind.VERDICT, "FAILED", True, False, (Next.FINAL, "FAILED")),
    (EndKind.VERDICT, "FAILED", False, True, (Next.FINAL, "FAILED")),
    (EndKind.TIMEOUT, "", False, True, (Next.RETRY, "")),
    (EndKind.TIMEOUT, "", False, False, (Next.FINAL, "FAILED")),
    (EndKind.CANCEL, "", False, True, (Next.FINAL, "CANCELLED")),
    (EndKind.CANCEL_OTHER, "", False, True, (Next.FINAL, "CANCELLED")),
    (EndKind.TERMINATE, "", False, True, (Next.FINAL, "CANCELLED")),
    (EndKind.SHUTDOWN, "", False, False, (Next.REQUEUE_FREE, "")),
    (EndKind.LOST, "", False, True, (Next.REQUEUE, "")),
    (EndKind.LOST, "", False, False, (Next.FINAL, "FAILED")),
    (EndKind.REFUSED, "BLOCKED", False, True, (Next.FINAL, "BLOCKED")),
])
def test_what_each_end_makes_of_the_run(kind, status, retryable, left, expected):
    the_plan = plan(kind, status=status, retryable=retryable, attempts_left=left)
    assert (the_plan.next, the_plan.status) == expected


def test_a_verdict_without_its_status_is_refused():
    with pytest.raises(ValueError, match="needs its status"):
        plan(EndKind.VERDICT, attempts_left=True)
