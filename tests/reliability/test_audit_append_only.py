"""The audit log cannot be changed or deleted, and never holds a secret."""
import pytest
from django.contrib.auth.models import User

from scheduler.models import AuditEntry
from scheduler.services.common.audit import audit_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def entry():
    return audit_record(actor="user:alice", action="schedule.update", target=("schedule", 1), after={"a": 1})


def test_an_entry_cannot_be_saved_again_or_deleted(entry):
    entry.reason = "rewritten"
    with pytest.raises(PermissionError):
        entry.save()
    with pytest.raises(PermissionError):
        entry.delete()
    assert AuditEntry.objects.get(pk=entry.pk).reason == ""


def test_bulk_update_and_delete_are_refused(entry):
    with pytest.raises(PermissionError):
        AuditEntry.objects.filter(pk=entry.pk).update(reason="x")
    with pytest.raises(PermissionError):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.count() == 1


def test_even_a_superuser_cannot_change_or_delete_entries_in_the_admin(client, entry):
    admin = User.objects.create_superuser("root", "root@example.com", "pw-root-x9!")
    client.force_login(admin)
    change = client.get(f"/admin/scheduler/auditentry/{entry.pk}/change/")
    assert change.status_code == 200 and b'name="_save"' not in change.content
    assert client.post(f"/admin/scheduler/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post("/admin/scheduler/auditentry/add/", {}).status_code == 403
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_the_webhook_secret_never_reaches_the_audit_log(make_schedule):
    from scheduler.services.definitions.schedules import schedule_rotate_secret

    schedule = make_schedule("hook", trigger_kind="webhook")
    old = schedule.webhook_secret
    new = schedule_rotate_secret(schedule=schedule, actor="user:alice", reason="leaked")
    assert old and new and old != new
    dumped = " ".join(str(v) for v in AuditEntry.objects.values_list("before", "after", "reason", "target_repr"))
    assert old not in dumped and new not in dumped
