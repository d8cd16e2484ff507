import getpass
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def marked(make_schedule):
    return make_schedule("marked", watermark_config={"type": "integer", "column": "id", "initial": 10})


def _json(*args):
    out = StringIO()
    call_command("watermark", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_it_shows_the_mark(marked):
    data = _json("marked")
    assert (data["value"], data["type"], data["changed"], data["history"]) == (None, "integer", False, [])


def test_set_and_reset_change_the_mark_with_history_and_audit(marked, monkeypatch):
    monkeypatch.setattr(getpass, "getuser", lambda: "shelly")  # the actor by default, as trigger's
    data = _json("marked", "--set", "500", "--reason", "skip the bad ids", "--actor", "olivia")
    assert (data["before"], data["value"], data["changed"]) == (None, "500", True)
    assert data["history"][0]["kind"] == "set" and data["history"][0]["reason"] == "skip the bad ids"
    data = _json("marked", "--reset", "--reason", "reload")
    assert (data["before"], data["value"]) == ("500", None)
    assert list(AuditEntry.objects.order_by("id").filter(action__startswith="watermark.")
                .values_list("action", "actor")) == [("watermark.set", "olivia"), ("watermark.reset", "shelly")]


@pytest.mark.parametrize("args, text", [
    (["--set", "12"], "reason"),
    (["--set", "twelve", "--reason", "x"], "value"),
])
def test_bad_input_exits_2_naming_the_field_and_changes_nothing(marked, args, text):
    with pytest.raises(CommandError) as info:
        call_command("watermark", "marked", *args)
    assert info.value.returncode == 2 and text in str(info.value)
    assert not AuditEntry.objects.filter(action__startswith="watermark.").exists()


def test_a_schedule_without_a_watermark_exits_2(make_schedule):
    make_schedule("plain")
    with pytest.raises(CommandError) as info:
        call_command("watermark", "plain")
    assert info.value.returncode == 2 and "has no watermark" in str(info.value)


def test_a_future_datetime_mark_needs_force(make_schedule):
    make_schedule("dated", watermark_config={"type": "datetime", "column": "ts",
                                             "initial": "2020-01-01T00:00:00+00:00"})
    with pytest.raises(CommandError, match="value: .* is in the future") as info:
        call_command("watermark", "dated", "--set", "2999-01-01T00:00:00+00:00", "--reason", "x")
    assert info.value.returncode == 2
    assert _json("dated")["value"] is None
    data = _json("dated", "--set", "2999-01-01T00:00:00+00:00", "--reason", "planned", "--force")
    assert data["value"] == "2999-01-01T00:00:00+00:00"
