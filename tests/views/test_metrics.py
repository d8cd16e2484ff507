from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduler.models import BreakerStatus, GovernanceTick, RunStatus, Schedule

URL = reverse("scheduler:metrics")


def _samples(response) -> dict:
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_it_is_not_found_when_no_token_is_configured(client, settings, db):
    settings.ETL_METRICS_TOKEN = ""
    assert client.get(URL, headers={"Authorization": "Bearer "}).status_code == 404


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic c2VjcmV0", "secret-token-123"])
def test_it_refuses_a_missing_or_wrong_token(client, settings, db, header):
    settings.ETL_METRICS_TOKEN = "secret-token-123"
    headers = {"Authorization": header} if header else {}
    assert client.get(URL, headers=headers).status_code == 403


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive_as_on_the_event_endpoint(client, settings, db, scheme):
    settings.ETL_METRICS_TOKEN = "secret-token-123"
    assert client.get(URL, headers={"Authorization": f"{scheme} secret-token-123"}).status_code == 200


def test_it_reports_queue_runs_histograms_breakers_and_the_tick_age(client, settings, make_schedule, now):
    from scheduler.models import Run

    settings.ETL_METRICS_TOKEN = "secret-token-123"
    schedule = make_schedule("orders")
    real_now = timezone.now()
    base = {"schedule": schedule, "workload_class_id": schedule.workload_class_id, "trigger_kind": "manual"}
    Run.objects.create(trigger_key="q1", status=RunStatus.QUEUED, queued_at=real_now, **base)
    Run.objects.create(trigger_key="q2", status=RunStatus.QUEUED, queued_at=real_now, **base)
    Run.objects.create(
        trigger_key="d1",
        status=RunStatus.SUCCEEDED,
        queued_at=real_now - timedelta(seconds=70),
        started_at=real_now - timedelta(seconds=68),
        finished_at=real_now - timedelta(seconds=8),
        **base,
    )
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN)
    GovernanceTick.objects.create(started_at=real_now - timedelta(seconds=30))

    response = client.get(URL, headers={"Authorization": "Bearer secret-token-123"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    s = _samples(response)
    assert s[("etl_queue_depth", (("status", "QUEUED"), ("workload_class", "standard")))] == 2
    assert s[("etl_workload_class_limit", (("workload_class", "standard"),))] == 4
    assert s[("etl_runs", (("status", "QUEUED"),))] == 2
    assert ("etl_runs", (("status", "SUCCEEDED"),)) not in s  # final statuses are counters (test_metrics_bounded)
    assert s[("etl_run_duration_seconds_count", ())] == 1
    assert s[("etl_run_duration_seconds_bucket", (("le", "30.0"),))] == 0
    assert s[("etl_run_duration_seconds_bucket", (("le", "60.0"),))] == 1
    assert s[("etl_run_start_latency_seconds_sum", ())] == pytest.approx(2, abs=0.01)
    assert s[("etl_breakers", (("state", "open"),))] == 1
    assert 29 <= s[("etl_governance_tick_age_seconds", ())] < 120


def test_the_tick_age_is_minus_one_when_governance_never_ran(client, settings, db):
    settings.ETL_METRICS_TOKEN = "t0k3n-t0k3n"
    s = _samples(client.get(URL, headers={"Authorization": "Bearer t0k3n-t0k3n"}))
    assert s[("etl_governance_tick_age_seconds", ())] == -1


def test_the_team_families_break_the_totals_down_by_owning_team(client, settings, make_schedule):
    from scheduler.models import Run
    from scheduler.services.access.teams import team_save

    settings.ETL_METRICS_TOKEN = "secret-token-123"
    team_save(data={"name": "billing"}, actor="tests")
    mine = make_schedule("orders")
    theirs = make_schedule("invoices", owner="billing")
    real_now = timezone.now()
    for schedule, status in ((mine, RunStatus.QUEUED), (theirs, RunStatus.RUNNING), (theirs, RunStatus.FAILED)):
        Run.objects.create(schedule=schedule, workload_class_id=schedule.workload_class_id, trigger_kind="manual",
                           trigger_key=f"k-{schedule.name}-{status}", status=status, queued_at=real_now,
                           finished_at=real_now if status == RunStatus.FAILED else None)
    Schedule.objects.filter(pk=theirs.pk).update(breaker_status=BreakerStatus.OPEN)
    s = _samples(client.get(URL, headers={"Authorization": "Bearer secret-token-123"}))
    assert s[("etl_team_schedules", (("team", "billing"),))] == 1
    assert s[("etl_team_schedules", (("team", "default"),))] == 1
    assert s[("etl_team_active_runs", (("status", "QUEUED"), ("team", "default")))] == 1
    assert s[("etl_team_active_runs", (("status", "RUNNING"), ("team", "billing")))] == 1
    assert s[("etl_team_active_runs", (("status", "QUEUED"), ("team", "billing")))] == 0
    assert s[("etl_team_finished_runs_recent", (("status", "FAILED"), ("team", "billing")))] == 1
    assert s[("etl_team_finished_runs_recent", (("status", "FAILED"), ("team", "default")))] == 0
    assert s[("etl_team_breakers", (("state", "open"), ("team", "billing")))] == 1
    assert s[("etl_team_breakers", (("state", "closed"), ("team", "default")))] == 1


def test_runs_asked_to_stop_are_counted_while_they_hold_their_slots(client, settings, make_schedule):
    from scheduler.models import Run

    settings.ETL_METRICS_TOKEN = "secret-token-123"
    schedule = make_schedule("orders")
    real_now = timezone.now()
    base = {"schedule": schedule, "workload_class_id": schedule.workload_class_id, "trigger_kind": "manual",
            "status": RunStatus.RUNNING, "queued_at": real_now, "started_at": real_now}
    Run.objects.create(trigger_key="r1", **base)
    Run.objects.create(trigger_key="r2", stop_requested_at=real_now, stop_kind="cancel", **base)
    s = _samples(client.get(URL, headers={"Authorization": "Bearer secret-token-123"}))
    assert s[("etl_runs_stopping", ())] == 1
    assert s[("etl_runs", (("status", "RUNNING"),))] == 2
