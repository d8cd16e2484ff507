import pytest

from scheduler.core import ConfigError, PermanentError, RetryPolicy, with_retry


class Flaky:
    def __init__(self, failures: int, exc: Exception | None = None) -> None:
        self.failures = failures
        self.exc = exc or IOError("temporary")
        self.calls = 0

    def __call__(self, value="ok"):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc
        return value


def test_retry_recovers_a_transient_failure_without_real_sleeping():
    fn = Flaky(failures=2)
    sleeps: list[float] = []
    assert with_retry(RetryPolicy(max_attempts=3), fn, "v", sleep=sleeps.append) == "v"
    assert fn.calls == 3
    assert sleeps == [1.0, 2.0]


def test_retry_gives_up_after_max_attempts_and_reraises_the_last_error():
    fn = Flaky(failures=10)
    sleeps: list[float] = []
    with pytest.raises(IOError):
        with_retry(RetryPolicy(max_attempts=4), fn, sleep=sleeps.append)
    assert fn.calls == 4
    assert len(sleeps) == 3


def test_permanent_errors_are_not_retried():
    fn = Flaky(failures=5, exc=PermanentError("no such table"))
    with pytest.raises(PermanentError):
        with_retry(RetryPolicy(max_attempts=5), fn, sleep=lambda s: None)
    assert fn.calls == 1


def test_any_exception_marked_permanent_is_not_retried():
    class AuthError(Exception):
        permanent = True

    fn = Flaky(failures=5, exc=AuthError("bad password"))
    with pytest.raises(AuthError):
        with_retry(RetryPolicy(max_attempts=5), fn, sleep=lambda s: None)
    assert fn.calls == 1


def test_on_retry_is_told_the_attempt_error_and_delay():
    seen = []
    fn = Flaky(failures=2)
    with_retry(
        RetryPolicy(max_attempts=3, initial_delay=0.5),
        fn,
        sleep=lambda s: None,
        on_retry=lambda attempt, exc, delay: seen.append((attempt, str(exc), delay)),
    )
    assert seen == [(1, "temporary", 0.5), (2, "temporary", 1.0)]


def test_keyword_arguments_are_forwarded_to_the_function():
    assert with_retry(RetryPolicy(), Flaky(0), value="kw", sleep=lambda s: None) == "kw"


def test_delay_grows_exponentially_and_is_capped():
    policy = RetryPolicy(initial_delay=1, backoff=3, max_delay=20)
    assert [policy.delay(n) for n in range(1, 6)] == [1, 3, 9, 20, 20]
    assert policy.delay(10_000) == 20


def test_jitter_stays_within_its_fraction():
    policy = RetryPolicy(initial_delay=10, jitter=0.2)
    assert policy.delay(1, rng=lambda: 0.0) == pytest.approx(8.0)
    assert policy.delay(1, rng=lambda: 1.0) == pytest.approx(12.0)
    assert policy.delay(1, rng=lambda: 0.5) == pytest.approx(10.0)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"initial_delay": -1}, "initial_delay"),
        ({"max_delay": -1}, "max_delay"),
        ({"backoff": 0.5}, "backoff"),
        ({"jitter": 1.5}, "jitter"),
        ({"jitter": -0.1}, "jitter"),
    ],
)
def test_invalid_policy_raises_config_error_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        RetryPolicy(**kwargs)
    assert info.value.field == field
    assert field in str(info.value)


def test_policy_round_trips_through_a_dict():
    policy = RetryPolicy(max_attempts=5, initial_delay=0.5, backoff=3, max_delay=30, jitter=0.1)
    assert RetryPolicy.from_dict(policy.to_dict()) == policy


def test_unknown_policy_keys_are_refused():
    with pytest.raises(ConfigError) as info:
        RetryPolicy.from_dict({"max_attempt": 3})
    assert info.value.field == "max_attempt"


def test_errors_retry_if_refuses_are_raised_at_once():
    fn = Flaky(failures=5, exc=KeyError("not this one"))
    seen: list = []
    with pytest.raises(KeyError):
        with_retry(
            RetryPolicy(max_attempts=5), fn, sleep=seen.append, retry_if=lambda exc: not isinstance(exc, KeyError)
        )
    assert (fn.calls, seen) == (1, [])
    flaky = Flaky(failures=1)
    assert with_retry(RetryPolicy(max_attempts=5), flaky, sleep=seen.append, retry_if=lambda exc: True) == "ok"
    assert flaky.calls == 2
