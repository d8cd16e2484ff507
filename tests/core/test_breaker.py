from datetime import timedelta

import pytest

from scheduler.core import (
    BreakerSettings,
    BreakerState,
    BreakerStatus,
    ConfigError,
    admit,
    cooldown_over,
    record_failure,
    record_success,
    reset,
)

from .fakes import T0

SETTINGS = BreakerSettings(threshold=3, cooldown=timedelta(minutes=5), max_cooldown=timedelta(minutes=15))


def fail(state, times, now=T0):
    for _ in range(times):
        state = record_failure(state, SETTINGS, now)
    return state


def test_breaker_stays_closed_below_the_threshold():
    state = fail(BreakerState(), 2)
    assert state.status is BreakerStatus.CLOSED and state.failures == 2
    assert admit(state, SETTINGS, T0) == (True, state, "")


def test_breaker_opens_at_the_threshold_and_refuses_runs():
    state = fail(BreakerState(), 3)
    assert state.status is BreakerStatus.OPEN
    assert state.opened_at == T0 and state.cooldown == timedelta(minutes=5)
    allowed, same, reason = admit(state, SETTINGS, T0 + timedelta(minutes=4))
    assert (allowed, same, reason) == (False, state, "circuit open")
    assert not cooldown_over(state, T0 + timedelta(minutes=4))


def test_exactly_one_trial_is_admitted_when_half_open():
    state = fail(BreakerState(), 3)
    later = T0 + timedelta(minutes=5)
    assert cooldown_over(state, later)
    allowed, state, _ = admit(state, SETTINGS, later)
    assert allowed and state.status is BreakerStatus.HALF_OPEN and state.trial_in_flight
    allowed, state2, reason = admit(state, SETTINGS, later)
    assert not allowed and state2 == state
    assert reason == "circuit half-open: test run in progress"


def test_a_successful_trial_closes_the_breaker_and_zeroes_the_count():
    state = fail(BreakerState(), 3)
    _, state, _ = admit(state, SETTINGS, T0 + timedelta(minutes=6))
    state = record_success(state, SETTINGS)
    assert state == BreakerState()
    assert state.failures == 0 and state.cooldown is None


def test_a_failed_trial_reopens_with_the_cooldown_doubled_and_capped():
    state = fail(BreakerState(), 3)
    cooldowns = []
    now = T0
    for _ in range(4):
        now = now + state.cooldown
        allowed, state, _ = admit(state, SETTINGS, now)
        assert allowed
        state = record_failure(state, SETTINGS, now)
        assert state.status is BreakerStatus.OPEN and state.opened_at == now
        cooldowns.append(state.cooldown)
    assert cooldowns == [timedelta(minutes=10), timedelta(minutes=15), timedelta(minutes=15), timedelta(minutes=15)]


def test_a_late_failure_while_open_does_not_restart_the_cooldown():
    state = fail(BreakerState(), 3)
    later = record_failure(state, SETTINGS, T0 + timedelta(minutes=3))
    assert later.opened_at == T0 and later.failures == 4


def test_success_in_closed_state_zeroes_the_count():
    assert record_success(fail(BreakerState(), 2), SETTINGS).failures == 0


def test_reset_closes_an_open_breaker():
    assert reset(fail(BreakerState(), 5)) == BreakerState()


def test_state_round_trips_through_a_dict():
    state = fail(BreakerState(), 3)
    assert BreakerState.from_dict(state.to_dict()) == state
    assert BreakerState.from_dict(BreakerState().to_dict()) == BreakerState()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"threshold": 0}, "threshold"),
        ({"cooldown": timedelta(0)}, "cooldown"),
        ({"max_cooldown": timedelta(minutes=1)}, "max_cooldown"),
    ],
)
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        BreakerSettings(**kwargs)
    assert info.value.field == field
