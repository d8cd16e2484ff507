from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import QueuedItem, plan_admissions

from .fakes import T0


def item(id, priority=5, minute=0, cls="standard", schedule=None):
    return QueuedItem(id, priority, T0 + timedelta(minutes=minute), cls, schedule or f"s{id}")


def test_higher_priority_first_then_fifo_then_id():
    queued = [item(1, 5, 2), item(2, 9, 5), item(3, 5, 1), item(4, 5, 1)]
    admitted, reasons = plan_admissions(queued, {}, {})
    assert admitted == [2, 3, 4, 1]
    assert reasons == {}


def test_a_full_class_waits_with_its_occupancy_as_reason():
    queued = [item(1, cls="heavy"), item(2, cls="heavy", minute=1), item(3, cls="standard", minute=2)]
    admitted, reasons = plan_admissions(queued, {"heavy": 1}, {"heavy": 2, "standard": 4})
    assert admitted == [1, 3]
    assert reasons == {2: "class 'heavy' full (2/2)"}


def test_blocked_schedules_wait_with_the_given_reason():
    queued = [item(1, schedule="s"), item(2, minute=1)]
    admitted, reasons = plan_admissions(queued, {}, {}, {"s": "rate limited until 12:01:00"})
    assert admitted == [2]
    assert reasons == {1: "rate limited until 12:01:00"}


def test_max_admit_leaves_the_rest_with_their_queue_position():
    queued = [item(i, minute=i) for i in range(1, 6)]
    admitted, reasons = plan_admissions(queued, {}, {}, max_admit=2)
    assert admitted == [1, 2]
    assert reasons == {3: "position 1 in queue", 4: "position 2 in queue", 5: "position 3 in queue"}


def test_a_zero_limit_pauses_a_class_and_a_missing_limit_is_unlimited():
    admitted, reasons = plan_admissions([item(1, cls="paused"), item(2, cls="free")], {}, {"paused": 0})
    assert admitted == [2]
    assert reasons == {1: "class 'paused' full (0/0)"}


classes = st.sampled_from(["standard", "heavy", "critical"])
items = st.lists(
    st.builds(
        QueuedItem,
        id=st.integers(0, 10**6),
        priority=st.integers(0, 9),
        queued_at=st.integers(0, 1000).map(lambda m: T0 + timedelta(minutes=m)),
        workload_class=classes,
        schedule_id=st.integers(0, 5),
    ),
    max_size=40,
    unique_by=lambda q: q.id,
)


@settings(deadline=None)
@given(
    queued=items,
    running=st.dictionaries(classes, st.integers(0, 4)),
    limits=st.dictionaries(classes, st.integers(0, 4)),
    blocked=st.dictionaries(st.integers(0, 5), st.just("blocked"), max_size=2),
    max_admit=st.none() | st.integers(0, 10),
)
def test_plan_never_exceeds_a_limit_and_respects_priority_and_fifo(queued, running, limits, blocked, max_admit):
    admitted, reasons = plan_admissions(queued, running, limits, blocked, max_admit)
    by_id = {q.id: q for q in queued}
    assert set(admitted) | set(reasons) == set(by_id)
    assert not set(admitted) & set(reasons)
    if max_admit is not None:
        assert len(admitted) <= max_admit
    for cls, limit in limits.items():
        new = sum(1 for i in admitted if by_id[i].workload_class == cls)
        if new:
            assert running.get(cls, 0) + new <= limit
    keys = [(-by_id[i].priority, by_id[i].queued_at, i) for i in admitted]
    assert keys == sorted(keys)
    # Nobody waits for a free slot while a later run of the same class gets it.
    for waiting, reason in reasons.items():
        if reason.startswith("position"):
            w = by_id[waiting]
            assert all(
                (-by_id[i].priority, by_id[i].queued_at, i) < (-w.priority, w.queued_at, waiting) for i in admitted
            )
    assert all(by_id[i].schedule_id not in blocked for i in admitted)
