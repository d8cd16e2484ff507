import pickle

import pytest

from scheduler.core import ConfigError, CycleError, EtlError, PermanentError


def test_cycle_error_names_the_cycle_path():
    exc = CycleError(["a", "b", "c", "a"])
    assert exc.cycle == ["a", "b", "c", "a"]
    assert str(exc) == "cycle: a -> b -> c -> a"
    assert isinstance(exc, EtlError)


def test_config_error_is_a_value_error_naming_its_field():
    exc = ConfigError("cron", "bad expression")
    assert isinstance(exc, ValueError) and isinstance(exc, EtlError)
    assert exc.field == "cron"
    assert str(exc) == "cron: bad expression"


def test_config_error_accepts_field_as_keyword():
    exc = ConfigError("from must be before to", field="from")
    assert exc.field == "from"
    assert str(exc) == "from must be before to"


@pytest.mark.parametrize(
    "exc",
    [CycleError(["a", "b", "a"]), ConfigError("window", "must be positive"), PermanentError("gone")],
)
def test_errors_survive_pickling_for_the_task_queue(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    assert getattr(back, "field", None) == getattr(exc, "field", None)
    assert getattr(back, "cycle", None) == getattr(exc, "cycle", None)


def test_permanent_error_is_marked_permanent():
    assert PermanentError("x").permanent is True
