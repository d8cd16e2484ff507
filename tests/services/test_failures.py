"""The overview's failure work list: grouped by schedule, cleared by a later success, acknowledged with a note."""
from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.models import AuditEntry, FailureAck, RunStatus, Team
from scheduler.services.oversight.failures import failure_acknowledge
from scheduler.services.access.teams import PermissionRefused
from scheduler.services.common.errors import ServiceError
from scheduler.worklist import failure_worklist
from tests.views.conftest import make_run  # noqa: F401  (the run factory)

pytestmark = pytest.mark.django_db


def _names(items):
    return [item["schedule"].name for item in items]


def test_failures_are_grouped_by_schedule_with_the_last_one_and_a_count(make_schedule, make_run, now):
    flapping, other = make_schedule("flapping"), make_schedule("other")
    runs = [make_run(flapping, RunStatus.FAILED, reason=f"boom {i}", finished_at=now - timedelta(minutes=10 - i))
            for i in range(5)]
    make_run(other, RunStatus.FAILED, reason="other broke", finished_at=now - timedelta(minutes=30))
    work = failure_worklist(now)
    assert _names(work["open"]) == ["flapping", "other"]
    first = work["open"][0]
    assert first["run"].pk == runs[-1].pk and first["count"] == 5 and first["run"].reason == "boom 4"
    assert work["recovered"] == [] and work["acknowledged"] == []


def test_a_later_success_moves_a_schedule_to_recovered(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    make_run(schedule, RunStatus.FAILED, finished_at=now - timedelta(minutes=10))
    success = make_run(schedule, RunStatus.SUCCEEDED, finished_at=now - timedelta(minutes=1))
    work = failure_worklist(now)
    assert work["open"] == [] and _names(work["recovered"]) == ["orders"]
    assert work["recovered"][0]["recovered_by"]["pk"] == success.pk


def test_a_success_before_the_last_failure_does_not_clear_it(make_schedule, make_run, now):
    schedule = make_schedule("orders")
    make_run(schedule, RunStatus.SUCCEEDED, finished_at=now - timedelta(minutes=20))
    make_run(schedule, RunStatus.FAILED, finished_at=now - timedelta(minutes=10))
    assert _names(failure_worklist(now)["open"]) == ["orders"]


def test_an_acknowledged_schedule_leaves_the_open_list_until_it_fails_again(make_schedule, make_run, operator, now):
    schedule = make_schedule("orders")
    failed = make_run(schedule, RunStatus.FAILED, finished_at=now - timedelta(minutes=10))
    ack = failure_acknowledge(schedule=schedule, actor=operator, note="source down, ticket OPS-12", now=now)
    assert (ack.up_to_run_id, ack.actor, ack.note, ack.at) == (failed.pk, "olivia", "source down, ticket OPS-12", now)
    work = failure_worklist(now)
    assert work["open"] == [] and _names(work["acknowledged"]) == ["orders"]
    assert work["acknowledged"][0]["ack"].note == "source down, ticket OPS-12"
    entry = AuditEntry.objects.get(action="failure.acknowledge")
    assert (entry.actor, entry.reason) == ("olivia", "source down, ticket OPS-12")
    assert entry.after == {"up_to_run": failed.pk}
    make_run(schedule, RunStatus.FAILED, finished_at=now - timedelta(minutes=1))
    again = failure_worklist(now)
    assert _names(again["open"]) == ["orders"] and again["open"][0]["earlier_ack"].note == "source down, ticket OPS-12"


def test_acknowledging_needs_a_note_and_a_failure_and_changes_nothing_otherwise(make_schedule, make_run, operator, now):
    schedule = make_schedule("orders")
    with pytest.raises(ServiceError, match="note: nothing to acknowledge|nothing to acknowledge"):
        failure_acknowledge(schedule=schedule, actor=operator, note="why", now=now)
    make_run(schedule, RunStatus.FAILED)
    for note in ("", "   ", "x" * 501, 5):
        with pytest.raises(ServiceError) as info:
            failure_acknowledge(schedule=schedule, actor=operator, note=note, now=now)
        assert info.value.field == "note"
    assert not FailureAck.objects.exists() and not AuditEntry.objects.filter(action="failure.acknowledge").exists()


def test_only_a_member_of_the_owning_team_may_acknowledge_and_the_refusal_is_audited(make_schedule, make_run,
                                                                                     make_user, now):
    other = Team.objects.create(name="analytics")
    schedule = make_schedule("orders", owner=other)
    make_run(schedule, RunStatus.FAILED)
    outsider = make_user("oscar", "operator")
    with pytest.raises(PermissionRefused, match="acknowledge the failures of schedule 'orders'"):
        failure_acknowledge(schedule=schedule, actor=outsider, note="mine now", now=now)
    viewer = make_user("vera", "viewer")
    other.members.add(viewer)
    with pytest.raises(PermissionRefused):
        failure_acknowledge(schedule=schedule, actor=viewer, note="mine now", now=now)
    assert not FailureAck.objects.exists()
    assert AuditEntry.objects.filter(action="permission.denied", actor="oscar").exists()


def test_the_work_list_is_narrowed_to_teams(make_schedule, make_run, now):
    analytics = Team.objects.create(name="analytics")
    make_run(make_schedule("ours"), RunStatus.FAILED)
    make_run(make_schedule("theirs", owner=analytics), RunStatus.FAILED)
    assert _names(failure_worklist(now, team_ids=frozenset({analytics.pk}))["open"]) == ["theirs"]
    assert sorted(_names(failure_worklist(now)["open"])) == ["ours", "theirs"]
