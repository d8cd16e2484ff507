from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import next_allowed_start

from .fakes import T0

S = timedelta(seconds=1)


def test_zero_means_unlimited():
    assert next_allowed_start([T0] * 100, 0, T0) is None


def test_starts_below_the_limit_may_start_now():
    assert next_allowed_start([T0 - 10 * S], 2, T0) is None


def test_a_full_minute_says_when_the_oldest_start_leaves_the_window():
    starts = [T0 - 50 * S, T0 - 30 * S, T0 - 10 * S]
    assert next_allowed_start(starts, 3, T0) == T0 + 10 * S
    assert next_allowed_start(starts, 2, T0) == T0 + 30 * S
    assert next_allowed_start(starts, 3, T0 + 10 * S) is None


def test_starts_older_than_a_minute_do_not_count():
    assert next_allowed_start([T0 - 60 * S, T0 - 61 * S], 1, T0) is None


@settings(deadline=None)
@given(
    limit=st.integers(1, 5),
    offsets=st.lists(st.integers(0, 600_000), min_size=1, max_size=60),
)
def test_never_more_than_the_limit_in_any_60_second_window(limit, offsets):
    # A dispatcher that retries each queued run until the limiter allows it.
    starts = []
    for offset in sorted(offsets):
        now = T0 + timedelta(milliseconds=offset)
        if starts and now < starts[-1]:
            now = starts[-1]
        wait = next_allowed_start(starts, limit, now)
        if wait is not None:
            assert wait > now
            now = wait
            assert next_allowed_start(starts, limit, now) is None
        starts.append(now)
    for i, first in enumerate(starts):
        in_window = [s for s in starts[i:] if s < first + timedelta(seconds=60)]
        assert len(in_window) <= limit
