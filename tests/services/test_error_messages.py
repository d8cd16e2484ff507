"""A refused submit's problem under its form field says the field's name once (the form shows it before)."""
from __future__ import annotations

from scheduler.services.common.errors import ServiceError


def test_a_problem_under_its_field_does_not_name_the_field_again():
    assert ServiceError("window: 19373760 windows exceed the limit of 100000", field="window").message_under(
        "window") == "19373760 windows exceed the limit of 100000"
    assert ServiceError("must be positive", field="window").message_under("window") == "must be positive"
    assert ServiceError("bad", field="trigger_config.cron").message_under("trigger_config") == "cron: bad"
    assert ServiceError("cron: bad", field="trigger_config.cron").message_under("trigger_config") == "cron: bad"
