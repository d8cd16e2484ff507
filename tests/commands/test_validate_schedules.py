import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import Schedule
from scheduler.pipelines import registry

pytestmark = pytest.mark.django_db(transaction=True)


def test_all_valid_schedules_exit_0(make_schedule):
    make_schedule("a")
    make_schedule("b", depends_on=["a"])
    out = StringIO()
    call_command("validate_schedules", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"ok": True, "cycles": [], "problems": []}


def test_it_lists_every_cycle_unknown_target_and_invalid_config_and_exits_1(make_schedule):
    a, b = make_schedule("a"), make_schedule("b", depends_on=["a"])
    c = make_schedule("c", depends_on=["b"])
    x, y = make_schedule("x"), make_schedule("y", depends_on=["x"])
    # written behind the service's back, as an old database or a raw SQL fix would
    a.depends_on.add(c)
    x.depends_on.add(y)
    registry.register_pipeline("test.gone", lambda ctx: None, replace=True)
    make_schedule("orphan", target_id="test.gone")
    registry._pipelines.pop("test.gone")
    make_schedule("zoned")
    Schedule.objects.filter(name="zoned").update(timezone="Mars/Olympus_Mons")
    out = StringIO()
    with pytest.raises(CommandError) as info:
        call_command("validate_schedules", "--json", stdout=out)
    assert info.value.returncode == 1
    data = json.loads(out.getvalue())
    assert data["ok"] is False
    assert sorted(data["cycles"]) == ["a -> b -> c -> a", "x -> y -> x"]
    problems = {p["schedule"]: p for p in data["problems"]}
    assert set(problems) == {"orphan", "zoned"}
    assert (
        problems["orphan"]["field"] == "target_id" and "unknown pipeline 'test.gone'" in problems["orphan"]["problem"]
    )
    assert problems["zoned"]["field"] == "timezone"
    del b


def test_the_text_output_spells_the_cycle(make_schedule):
    a = make_schedule("a")
    b = make_schedule("b", depends_on=["a"])
    a.depends_on.add(b)
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("validate_schedules", stdout=out)
    assert "cycle: a -> b -> a" in out.getvalue()
