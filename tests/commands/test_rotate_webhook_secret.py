import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduler.models import AuditEntry, Schedule

pytestmark = pytest.mark.django_db


def test_it_prints_the_new_secret_once_and_audits_without_it(make_schedule):
    hook = make_schedule("shop-hook", trigger_kind="webhook")
    out = StringIO()
    call_command("rotate_webhook_secret", "shop-hook", "--reason", "leaked", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["secret"] != hook.webhook_secret
    assert Schedule.objects.get(pk=hook.pk).webhook_secret == data["secret"]
    entry = AuditEntry.objects.get(action="schedule.rotate_secret")
    assert entry.reason == "leaked" and data["secret"] not in json.dumps([entry.before, entry.after, entry.reason])


def test_plain_output_shows_the_secret(make_schedule):
    make_schedule("shop-hook", trigger_kind="webhook")
    out = StringIO()
    call_command("rotate_webhook_secret", "shop-hook", stdout=out)
    assert Schedule.objects.get(name="shop-hook").webhook_secret in out.getvalue()


@pytest.mark.parametrize("name, message", [("ghost", "unknown schedule 'ghost'"), ("manual-one", "not a webhook")])
def test_bad_input_exits_2_and_changes_nothing(make_schedule, name, message):
    make_schedule("manual-one")
    with pytest.raises(CommandError) as info:
        call_command("rotate_webhook_secret", name)
    assert info.value.returncode == 2 and message in str(info.value)
    assert Schedule.objects.get(name="manual-one").webhook_secret == ""
