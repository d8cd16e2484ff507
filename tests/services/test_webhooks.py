"""Webhooks: signed, fresh, unreplayed JSON starts one run; everything else is refused, audited, runless."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from scheduler.models import AuditEntry, Run, Schedule, WebhookDelivery
from scheduler.services.common.errors import ServiceError
from scheduler.services.admission.webhooks import (
    Delivery,
    WebhookRefused,
    sign_webhook,
    webhook_prune,
    webhook_receive,
    webhook_rotate_secret,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def hook(make_schedule):
    return make_schedule("orders-hook", trigger_kind="webhook", params={"source": "shop"})


def _delivery(schedule, body: bytes, ts: int, *, secret=None, name=None, content_type="application/json", **over):
    headers = sign_webhook(secret or schedule.webhook_secret, body, ts)
    values = {"name": name or schedule.name, "body": body, "content_type": content_type,
              "timestamp": headers["X-Etl-Timestamp"], "signature": headers["X-Etl-Signature"], "remote": "10.0.0.9"}
    values.update(over)
    return Delivery(**values)


def test_a_signed_request_starts_one_run_with_the_body_as_params(hook, now):
    assert len(hook.webhook_secret) >= 32  # made on save
    run = webhook_receive(_delivery(hook, b'{"order": 42}', int(now.timestamp())), now=now)
    assert run.params == {"source": "shop", "order": 42}
    assert run.trigger_kind == "webhook" and run.trigger_key.startswith("webhook:")
    assert WebhookDelivery.objects.filter(schedule=hook).count() == 1
    assert AuditEntry.objects.filter(action="run.trigger", target_id=str(hook.pk)).exists()


def _refused(delivery, now, status, text):
    with pytest.raises(WebhookRefused) as exc:
        webhook_receive(delivery, now=now)
    assert exc.value.status == status
    assert text in str(exc.value)
    return exc.value


@pytest.mark.parametrize(
    "change, status, text",
    [
        ({"signature": "sha256=" + "0" * 64}, 401, "signature does not match"),
        ({"signature": None}, 401, "missing X-Etl-Signature"),
        ({"signature": "md5=abc"}, 401, "64 hex digits"),
        ({"timestamp": None}, 401, "missing X-Etl-Timestamp"),
        ({"timestamp": "12.5"}, 401, "digits only"),
        ({"content_type": "text/plain"}, 415, "application/json"),
        ({"name": "nope"}, 401, "signature does not match"),
        ({"name": "no\x00pe"}, 401, "signature does not match"),
    ],
)
def test_a_bad_request_is_refused_audited_and_starts_nothing(hook, now, change, status, text):
    delivery = _delivery(hook, b'{"a": 1}', int(now.timestamp()), **change)
    refused = _refused(delivery, now, status, text)
    assert not Run.objects.exists()
    entry = AuditEntry.objects.get(action="webhook.refused")
    assert refused.internal in entry.reason
    assert hook.webhook_secret not in json.dumps([entry.reason, entry.after, entry.target_repr])


def test_a_stale_or_future_timestamp_is_refused(hook, now, settings):
    settings.ETL_WEBHOOK_REPLAY_SECONDS = 300
    _refused(_delivery(hook, b"{}", int(now.timestamp()) - 301), now, 401, "too old")
    _refused(_delivery(hook, b"{}", int(now.timestamp()) + 301), now, 401, "future")
    assert webhook_receive(_delivery(hook, b"{}", int(now.timestamp()) - 299), now=now)


def test_a_replayed_request_is_refused_even_inside_the_window(hook, now):
    delivery = _delivery(hook, b'{"a": 1}', int(now.timestamp()))
    webhook_receive(delivery, now=now)
    _refused(delivery, now + timedelta(seconds=5), 409, "already received")
    assert Run.objects.count() == 1


def test_the_signature_covers_the_timestamp(hook, now):
    good = _delivery(hook, b"{}", int(now.timestamp()) - 1000)  # stale, but properly signed
    moved = Delivery(**{**good.__dict__, "timestamp": str(int(now.timestamp()))})
    _refused(moved, now, 401, "signature does not match")


@pytest.mark.parametrize(
    "body, text",
    [(b"{not json", "not valid JSON"), (b"[1, 2]", "JSON object"), (b'"text"', "JSON object"),
     (b"\xff\xfe", "not valid JSON")],
)
def test_a_malformed_body_is_refused(hook, now, body, text):
    _refused(_delivery(hook, body, int(now.timestamp())), now, 400, text)


def test_an_oversized_body_is_refused(hook, now, settings):
    settings.ETL_WEBHOOK_MAX_BYTES = 64
    _refused(_delivery(hook, json.dumps({"x": "y" * 100}).encode(), int(now.timestamp())), now, 413, "larger than 64")


def test_disabled_and_non_webhook_schedules_are_refused(hook, make_schedule, now):
    other = make_schedule("manual-one")
    other.webhook_secret = "s" * 40
    Schedule.objects.filter(pk=other.pk).update(webhook_secret=other.webhook_secret)
    _refused(_delivery(other, b"{}", int(now.timestamp())), now, 401, "signature does not match")
    Schedule.objects.filter(pk=hook.pk).update(enabled=False)
    _refused(_delivery(hook, b"{}", int(now.timestamp())), now, 401, "signature does not match")
    reasons = sorted(AuditEntry.objects.filter(action="webhook.refused").values_list("reason", flat=True))
    assert len(reasons) == 2 and "is not a webhook schedule" in reasons[0] and "is disabled" in reasons[1]


def test_unknown_non_webhook_disabled_and_badly_signed_get_the_same_answer(hook, make_schedule, now):
    ts = int(now.timestamp())
    manual = make_schedule("manual-one")
    Schedule.objects.filter(pk=manual.pk).update(webhook_secret="s" * 40)
    manual.webhook_secret = "s" * 40
    off = make_schedule("off-hook", trigger_kind="webhook")
    Schedule.objects.filter(pk=off.pk).update(enabled=False)
    answers = set()
    for delivery in (_delivery(hook, b"{}", ts, name="ghost"), _delivery(manual, b"{}", ts),
                     _delivery(off, b"{}", ts), _delivery(hook, b"{}", ts, secret="wrong")):
        with pytest.raises(WebhookRefused) as info:
            webhook_receive(delivery, now=now)
        answers.add((info.value.status, str(info.value), info.value.field))
    assert len(answers) == 1, answers


def test_a_flood_of_refusals_is_one_counted_entry_per_minute_and_reason(hook, now):
    from scheduler.models import WebhookRefusal

    ts = int(now.timestamp())
    for i in range(200):  # anonymous callers picking names: all count under "unknown"
        with pytest.raises(WebhookRefused):
            webhook_receive(_delivery(hook, b"{}", ts, name=f"guess-{i}", remote="203.0.113.7"),
                            now=now + timedelta(seconds=i % 30))
    counter = WebhookRefusal.objects.get()
    assert (counter.target, counter.code, counter.count, counter.sample) == ("unknown", "unknown", 200, "guess-199")
    assert AuditEntry.objects.filter(action="webhook.refused").count() == 1
    with pytest.raises(WebhookRefused):  # the next minute starts a new count and writes one more entry
        webhook_receive(_delivery(hook, b"{}", ts, name="guess-x"), now=now + timedelta(seconds=60))
    assert WebhookRefusal.objects.count() == 2 and AuditEntry.objects.filter(action="webhook.refused").count() == 2


def test_rotation_makes_the_old_secret_fail_and_the_new_one_work(hook, now):
    old = hook.webhook_secret
    new = webhook_rotate_secret(schedule=hook, actor="user:alice", reason="leaked", now=now)
    assert new != old and Schedule.objects.get(pk=hook.pk).webhook_secret == new
    _refused(_delivery(hook, b"{}", int(now.timestamp()), secret=old), now, 401, "signature does not match")
    assert webhook_receive(_delivery(hook, b"{}", int(now.timestamp()), secret=new), now=now)
    entry = AuditEntry.objects.get(action="schedule.rotate_secret")
    assert entry.actor == "alice" and new not in json.dumps([entry.before, entry.after, entry.reason])


def test_rotation_refuses_a_schedule_that_is_not_a_webhook(make_schedule):
    with pytest.raises(ServiceError) as exc:
        webhook_rotate_secret(schedule=make_schedule("m"), actor="tests")
    assert exc.value.field == "schedule"


def test_old_signatures_are_pruned_only_after_they_can_no_longer_be_replayed(hook, now, settings):
    settings.ETL_WEBHOOK_REPLAY_SECONDS = 300
    webhook_receive(_delivery(hook, b"{}", int(now.timestamp())), now=now)
    assert webhook_prune(now=now + timedelta(seconds=600)) == 0
    assert webhook_prune(now=now + timedelta(seconds=700)) == 1


def test_sign_webhook_matches_the_documented_scheme():
    import hashlib
    import hmac

    headers = sign_webhook("k", b'{"a":1}', 1700000000)
    expected = hmac.new(b"k", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
    assert headers == {"X-Etl-Timestamp": "1700000000", "X-Etl-Signature": f"sha256={expected}"}


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200), timestamp=st.one_of(st.none(), st.text(max_size=20)),
       signature=st.one_of(st.none(), st.text(max_size=80)))
def test_hostile_unsigned_input_is_always_a_4xx_and_never_a_run(hook, now, body, timestamp, signature):
    delivery = Delivery(name=hook.name, body=body, content_type="application/json", timestamp=timestamp,
                        signature=signature)
    with pytest.raises(WebhookRefused) as exc:
        webhook_receive(delivery, now=now)
    assert 400 <= exc.value.status < 500
    assert not Run.objects.exists()


def test_a_body_with_a_nul_character_is_a_400(hook, now):
    _refused(_delivery(hook, b'{"a": "\\u0000"}', int(now.timestamp())), now, 400, "NUL")
