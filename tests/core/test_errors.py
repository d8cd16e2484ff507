import pickle

import pytest

from scheduler.core import ConfigError, CycleError, EtlError, LoadError, PermanentError


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


def test_a_wrapped_failure_reads_cause_first_and_a_long_one_keeps_its_first_line_and_its_context():
    from scheduler.core.errors import failure_reason, first_line, in_context

    cause = RuntimeError('relation "src_events" does not exist\nLINE 1: SELECT ' + "x" * 900)
    wrapped = EtlError(in_context(cause, "while reading SqlSource('sqlite:///a.db', table='src_events')"))
    reason = failure_reason(wrapped, limit=200)
    assert len(reason) <= 200 and first_line(reason) == 'relation "src_events" does not exist'
    assert reason.endswith("\n…\nwhile reading SqlSource('sqlite:///a.db', table='src_events')")
    assert failure_reason(KeyError("country")) == "KeyError: 'country'"  # a bare message keeps its type
    assert failure_reason(LoadError("")) == "LoadError" and failure_reason(EtlError("x" * 600)) == "x" * 499 + "…"
