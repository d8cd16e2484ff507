import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def berlin(make_schedule):
    return make_schedule("berlin", trigger_kind="cron", timezone="Europe/Berlin",
                         trigger_config={"cron": "45 * * * *"})


def _json(*args):
    out = StringIO()
    call_command("next_fires", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_it_lists_fires_on_spring_forward_day_as_debian_cron_would(berlin):
    data = _json("berlin", "--after", "2024-03-31T00:00:00+00:00", "--count", "3")
    assert [f["local"] for f in data["fires"]] == [
        "2024-03-31T01:45:00+01:00", "2024-03-31T03:45:00+02:00", "2024-03-31T04:45:00+02:00"]
    assert data["fires"][1]["utc"] == "2024-03-31T01:45:00+00:00"


def test_it_prints_local_and_utc(berlin):
    out = StringIO()
    call_command("next_fires", "berlin", "--after", "2024-03-31T00:00:00+00:00", "--count", "1", stdout=out)
    assert "2024-03-31 01:45 CET    = 2024-03-31T00:45Z" in out.getvalue()


@pytest.mark.parametrize("args, text", [
    (["--count", "0"], "--count"),
    (["--after", "yesterday"], "--after"),
])
def test_bad_input_names_the_option(berlin, args, text):
    with pytest.raises(CommandError, match=text) as info:
        call_command("next_fires", "berlin", *args)
    assert info.value.returncode == 2


def test_a_manual_schedule_has_no_fire_times(make_schedule):
    make_schedule("by_hand")
    with pytest.raises(CommandError, match="only time-based"):
        call_command("next_fires", "by_hand")
