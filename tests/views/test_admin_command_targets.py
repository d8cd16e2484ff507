"""The admin authors command targets, time limits and deadlines; bad input lands under its own field."""
from __future__ import annotations

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, Schedule
from tests.views.test_admin import ADD, _form

DBT = {"argv": ["dbt", "build", "--select", "tag:nightly"], "cwd": "/srv/dbt", "env": {"DBT_TARGET": "prod"}}


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def _command_form(standard_class, **overrides):
    return _form(standard_class, **{"name": "nightly_dbt", "target_kind": "command", "target_id": "",
                                    "command": DBT, "timeout_seconds": "3600", **overrides})


def test_the_add_form_offers_the_command_target_and_its_limits_with_help(admin_client):
    response = admin_client.get(ADD)
    form = response.context["adminform"].form
    assert ("command", "Command") in form.fields["target_kind"].choices
    assert "terminate_other" in [value for value, _label in form.fields["overlap_policy"].choices]
    assert {"command", "timeout_seconds", "deadline_seconds"} <= set(form.fields)
    help_text = form.fields["command"].help_text
    assert '"argv": ["dbt", "build"' in help_text and "without a shell" in help_text and "ETL_PARAMS" in help_text
    assert "logical time" in form.fields["deadline_seconds"].help_text
    body = response.content.decode()
    assert "terminate_other" in body and "ETL_PARAMS" in body


def test_an_admin_creates_a_command_target_through_the_service(admin_client, standard_class):
    response = admin_client.post(ADD, _command_form(standard_class, deadline_seconds="7200",
                                                    overlap_policy="terminate_other"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    schedule = Schedule.objects.get(name="nightly_dbt")
    assert (schedule.target_kind, schedule.target_id, schedule.command) == ("command", "", DBT)
    assert (schedule.timeout_seconds, schedule.deadline_seconds, schedule.overlap_policy) == (3600, 7200,
                                                                                              "terminate_other")
    entry = AuditEntry.objects.get(action="schedule.create", actor="ada")
    assert entry.after["command"] == DBT and entry.after["timeout_seconds"] == 3600


def test_the_change_list_shows_what_a_command_target_runs(admin_client, standard_class, make_schedule):
    admin_client.post(ADD, _command_form(standard_class))
    make_schedule("orders", target_id="demo.noop")
    body = admin_client.get(reverse("admin:scheduler_schedule_changelist")).content.decode()
    assert "$ dbt build --select tag:nightly" in body and "demo.noop" in body


@pytest.mark.parametrize("overrides, field, text", [
    ({"command": {"cwd": "/srv/dbt"}}, "command", 'exactly one of "argv"'),
    ({"command": {"argv": "dbt build"}}, "command", "argv: must be a non-empty list of strings"),
    ({"command": {"argv": []}}, "command", "argv: must be a non-empty list of strings"),
    ({"command": {"argv": ["dbt"], "cwd": "srv/dbt"}}, "command", "cwd: must be an absolute path"),
    ({"command": {"argv": ["dbt"], "env": {"ETL_RUN_ID": "7"}}}, "command", "ETL_RUN_ID: ETL_* variables"),
    ({"command": {"argv": ["dbt"], "nice": 5}}, "command", "unknown key(s) nice"),
    ({"command": ""}, "command", "a command target needs a command"),
    ({"command": "[1, 2"}, "command", "valid JSON"),
    ({"target_id": "demo.noop"}, "target_id", "must be empty for a command target"),
    ({"target_kind": "pipeline", "target_id": "demo.noop"}, "command", "only a command target has a command"),
    ({"timeout_seconds": "0"}, "timeout_seconds", "greater than or equal to 1"),
    ({"deadline_seconds": "-5"}, "deadline_seconds", "greater than or equal to 1"),
    ({"timeout_seconds": "an hour"}, "timeout_seconds", "whole number"),
    ({"overlap_policy": "terminate_everyone"}, "overlap_policy", "terminate_everyone"),
])
def test_bad_input_shows_under_its_field_and_saves_nothing(admin_client, standard_class, overrides, field, text):
    response = admin_client.post(ADD, _command_form(standard_class, **overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert text in " ".join(errors[field]), errors[field]
    assert not Schedule.objects.exists()
    assert not AuditEntry.objects.filter(action="schedule.create").exists()


def test_a_bad_command_on_an_existing_schedule_changes_nothing(admin_client, standard_class):
    admin_client.post(ADD, _command_form(standard_class))
    schedule = Schedule.objects.get(name="nightly_dbt")
    url = reverse("admin:scheduler_schedule_change", args=[schedule.pk])
    response = admin_client.post(url, _command_form(standard_class, command={"argv": ["dbt"], "cwd": "relative"},
                                                    timeout_seconds="60"))
    assert "cwd: must be an absolute path" in " ".join(response.context["adminform"].form.errors["command"])
    schedule.refresh_from_db()
    assert (schedule.command, schedule.timeout_seconds) == (DBT, 3600)
    assert not AuditEntry.objects.filter(action="schedule.update").exists()


def test_a_pipeline_schedule_becomes_a_command_and_back(admin_client, standard_class, make_schedule):
    schedule = make_schedule("orders", target_id="demo.noop")
    url = reverse("admin:scheduler_schedule_change", args=[schedule.pk])
    response = admin_client.post(url, _command_form(standard_class, name="orders"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    schedule.refresh_from_db()
    assert (schedule.target_kind, schedule.target_id, schedule.command) == ("command", "", DBT)
    response = admin_client.post(url, _form(standard_class, name="orders", command="", timeout_seconds=""))
    assert response.status_code == 302, response.context["adminform"].form.errors
    schedule.refresh_from_db()
    assert (schedule.target_kind, schedule.target_id, schedule.command, schedule.timeout_seconds) == (
        "pipeline", "demo.noop", {}, None)
