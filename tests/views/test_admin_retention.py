"""The admin sets a schedule's own retention_days; a bad value lands under its field and saves nothing."""
from __future__ import annotations

import pytest

from scheduler.models import AuditEntry, Schedule
from tests.views.test_admin import ADD, _form


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def test_an_admin_sets_retention_days_and_the_prune_mark_is_read_only(admin_client, standard_class):
    form = admin_client.get(ADD).context["adminform"].form
    assert "retention_days" in form.fields and "runs_pruned_through" not in form.fields
    assert "ETL_RETENTION_RUNS_DAYS" in form.fields["retention_days"].help_text
    response = admin_client.post(ADD, _form(standard_class, retention_days="400"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get(name="orders").retention_days == 400


@pytest.mark.parametrize("value, text", [
    ("0", "greater than or equal to 1"), ("ninety", "whole number"), ("36501", "must be <= 36500"),
])
def test_a_bad_retention_days_shows_under_its_field(admin_client, standard_class, value, text):
    response = admin_client.post(ADD, _form(standard_class, retention_days=value))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert text in " ".join(errors.get("retention_days", [])), errors
    assert not Schedule.objects.exists() and not AuditEntry.objects.filter(action="schedule.create").exists()
