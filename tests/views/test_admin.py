"""The admin saves through the same validation as the services and acts through them."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, BreakerStatus, Run, RunStatus, Schedule, Team, WorkloadClass

ADD = reverse("admin:scheduler_schedule_add")


@pytest.fixture
def admin_client(client, make_user):
    user = make_user("ada", "admin", is_staff=True)
    client.force_login(user)
    return client


def _form(standard_class, **overrides) -> dict:
    data = {
        "name": "orders",
        "description": "",
        "target_kind": "pipeline",
        "target_id": "demo.noop",
        "enabled": "on",
        "priority": "5",
        "workload_class": str(standard_class.pk),
        "params": "{}",
        "trigger_kind": "manual",
        "trigger_config": "{}",
        "timezone": "UTC",
        "catchup": "latest",
        "max_catchup": "10",
        "overlap_policy": "",
        "watermark_config": "{}",
        "condition": "ALL_SUCCESS",
        "max_wait_seconds": "3600",
        "max_upstream_age_seconds": "86400",
        "breaker_threshold": "5",
        "breaker_cooldown_seconds": "300",
        "breaker_max_cooldown_seconds": "3600",
        "max_runs_per_minute": "0",
        "refresh_after_seconds": "",
        "freshness_max_age_seconds": "",
        "freshness_measure": "last_success",
        "retry_max_attempts": "3",
        "retry_initial_delay": "1.0",
        "retry_backoff": "2.0",
        "retry_max_delay": "60.0",
        "retry_jitter": "0.0",
        "alert_channels": "",
        "owner": str(Team.default_team_id()),  # required (issue 22)
    }
    for key, value in overrides.items():
        data[key] = json.dumps(value) if isinstance(value, dict) else value
    return data


def test_an_admin_creates_a_schedule_through_the_service_with_an_audit_entry(admin_client, standard_class):
    response = admin_client.post(ADD, _form(standard_class, trigger_kind="cron", trigger_config={"cron": "0 * * * *"}))
    assert response.status_code == 302, response.context["adminform"].form.errors
    schedule = Schedule.objects.get(name="orders")
    assert schedule.next_fire_at is not None
    assert AuditEntry.objects.filter(action="schedule.create", actor="ada").exists()


@pytest.mark.parametrize(
    "overrides, field, text",
    [
        ({"trigger_kind": "cron", "trigger_config": {"cron": "61 * * * *"}}, "trigger_config", ""),
        ({"timezone": "Mars/Olympus"}, "timezone", "Mars/Olympus"),
        ({"trigger_kind": "event", "trigger_config": {"topic": "orders", "filter": "status =="}}, "trigger_config", ""),
        ({"max_runs_per_minute": "-1"}, "max_runs_per_minute", "greater than or equal to 0"),
        ({"breaker_threshold": "0"}, "breaker_threshold", "must be >= 1"),
        ({"target_id": "no.such.pipeline"}, "target_id", "unknown pipeline"),
    ],
)
def test_invalid_input_shows_a_field_error_and_saves_nothing(admin_client, standard_class, overrides, field, text):
    response = admin_client.post(ADD, _form(standard_class, **overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert text in " ".join(errors[field])
    assert not Schedule.objects.filter(name="orders").exists()


def test_a_cycle_is_refused_on_depends_on_naming_the_cycle(admin_client, make_schedule, standard_class):
    a = make_schedule("a")
    b = make_schedule("b", depends_on=[a], trigger_kind="upstream")
    url = reverse("admin:scheduler_schedule_change", args=[a.pk])
    response = admin_client.post(url, _form(standard_class, name="a", depends_on=[str(b.pk)]))
    errors = response.context["adminform"].form.errors
    assert "a -> b -> a" in " ".join(errors["depends_on"]) or "b -> a -> b" in " ".join(errors["depends_on"])
    assert not a.depends_on.exists()


def test_a_negative_class_limit_is_refused(admin_client):
    response = admin_client.post(
        reverse("admin:scheduler_workloadclass_add"), {"name": "bulk", "concurrency_limit": "-2", "description": ""}
    )
    assert "concurrency_limit" in response.context["adminform"].form.errors
    assert not WorkloadClass.objects.filter(name="bulk").exists()


def test_workload_class_changes_are_audited(admin_client):
    admin_client.post(reverse("admin:scheduler_workloadclass_add"), {"name": "bulk", "concurrency_limit": "2"})
    assert AuditEntry.objects.filter(action="workload_class.create", actor="ada").exists()


def test_state_fields_are_read_only(admin_client, make_schedule):
    schedule = make_schedule("orders")
    response = admin_client.get(reverse("admin:scheduler_schedule_change", args=[schedule.pk]))
    form_fields = response.context["adminform"].form.fields
    assert "breaker_status" not in form_fields and "next_fire_at" not in form_fields
    assert "breaker_status" in response.context["adminform"].readonly_fields


def test_actions_enable_disable_run_now_and_reset_breaker_go_through_services(admin_client, make_schedule):
    schedule = make_schedule("orders")
    url = reverse("admin:scheduler_schedule_changelist")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    for name in ["disable", "enable", "run_now", "reset_breaker"]:
        admin_client.post(url, {"action": name, "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.breaker_status == BreakerStatus.CLOSED
    assert Run.objects.get(schedule=schedule).triggered_by == "ada"
    actions = set(AuditEntry.objects.filter(actor="ada").values_list("action", flat=True))
    assert {"schedule.update", "run.trigger", "breaker.reset"} <= actions


def test_the_failed_and_blocked_presets_filter_the_runs(admin_client, make_schedule):
    from tests.views.conftest import _keys

    schedule = make_schedule("orders")
    made = {}
    for status in (RunStatus.FAILED, RunStatus.BLOCKED, RunStatus.SUCCEEDED):
        made[status] = Run.objects.create(
            schedule=schedule,
            status=status,
            trigger_kind="manual",
            trigger_key=f"k{next(_keys)}",
            workload_class=schedule.workload_class,
            queued_at="2026-03-01T00:00:00Z",
        )
    url = reverse("admin:scheduler_run_changelist")
    failed = admin_client.get(url, {"attention": "failed"}).context["cl"].result_list
    stuck = admin_client.get(url, {"attention": "stuck"}).context["cl"].result_list
    assert [r.pk for r in failed] == [made[RunStatus.FAILED].pk]
    assert {r.pk for r in stuck} == {made[RunStatus.FAILED].pk, made[RunStatus.BLOCKED].pk}


def test_the_audit_log_is_read_only_in_the_admin(admin_client, db):
    entry = AuditEntry.objects.create(at="2026-03-01T00:00:00Z", actor="x", action="run.trigger", target_type="run")
    assert admin_client.get(reverse("admin:scheduler_auditentry_changelist")).status_code == 200
    assert admin_client.get(reverse("admin:scheduler_auditentry_add")).status_code == 403
    admin_client.post(reverse("admin:scheduler_auditentry_delete", args=[entry.pk]), {"post": "yes"})
    assert AuditEntry.objects.filter(pk=entry.pk).exists()


def test_the_admin_sets_a_watermark_through_the_service_and_refuses_a_future_one(admin_client, make_schedule):
    from scheduler.models import WatermarkState
    from scheduler.services.runs.watermarks import watermark_set

    schedule = make_schedule("dated", watermark_config={"type": "datetime", "column": "ts",
                                                        "initial": "2020-01-01T00:00:00+00:00"})
    watermark_set(schedule=schedule, value="2021-01-01T00:00:00+00:00", actor="tests", reason="start")
    url = reverse("admin:scheduler_watermarkstate_change", args=[schedule.pk])
    response = admin_client.post(url, {"value": "2999-01-01T00:00:00+00:00", "reason": "typo"})
    assert response.status_code == 200 and "is in the future" in response.content.decode()
    assert WatermarkState.objects.get(schedule=schedule).value == "2021-01-01T00:00:00+00:00"
    response = admin_client.post(url, {"value": "2022-01-01T00:00:00+00:00", "reason": "skip 2021"})
    assert response.status_code == 302
    assert WatermarkState.objects.get(schedule=schedule).value == "2022-01-01T00:00:00+00:00"
    assert AuditEntry.objects.filter(action="watermark.set", reason="skip 2021", actor="ada").exists()


def test_the_export_action_downloads_a_schedules_file_apply_reads_back(admin_client, make_schedule):
    from scheduler.services.definitions.schedule_files import schedules_apply

    a = make_schedule("alpha", priority=7)
    make_schedule("beta")
    response = admin_client.post(reverse("admin:scheduler_schedule_changelist"),
                                 {"action": "export_yaml", "_selected_action": [a.pk]})
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="schedules.yaml"'
    text = response.content.decode()
    assert "name: alpha" in text and "priority: 7" in text and "name: beta" not in text
    assert schedules_apply(text=text, actor="tests").summary["unchanged"] == 1


def test_the_admin_reruns_a_failed_workflow_run_from_its_failure(admin_client, make_schedule, make_run):
    from scheduler.models import TargetKind

    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="demo.nightly")
    failed, done = make_run(schedule, RunStatus.FAILED), make_run(schedule, RunStatus.SUCCEEDED)
    admin_client.post(reverse("admin:scheduler_run_changelist"),
                      {"action": "rerun_from_failure", "_selected_action": [failed.pk, done.pk]})
    assert list(Run.objects.filter(retry_of__isnull=False).values_list("retry_of_id", flat=True)) == [failed.pk]


def test_every_bad_field_is_reported_under_its_own_field_with_its_name_said_once(admin_client, standard_class):
    response = admin_client.post(ADD, _form(standard_class, trigger_kind="cron", trigger_config={"cron": "99 * * * *"},
                                            target_id="no.such.pipeline", breaker_threshold="0"))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) >= {"trigger_config", "target_id", "breaker_threshold"}, errors
    [cron] = errors["trigger_config"]
    assert cron.startswith("cron: ") and "trigger_config" not in cron and "cron: cron" not in cron
    assert errors["breaker_threshold"] == ["must be >= 1, got 0"]
    assert not Schedule.objects.filter(name="orders").exists()
