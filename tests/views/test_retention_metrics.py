"""/metrics tells whether retention keeps up: the oldest run's age and what the latest prune deleted."""
from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from scheduler.models import Run, RunStatus, TriggerKind
from scheduler.services.history.prune import history_prune
from tests.views.test_metrics import _samples

URL = reverse("scheduler:metrics")
AUTH = {"Authorization": "Bearer secret-token-123"}


def _run(schedule, key, age):
    at = timezone.now() - age
    return Run.objects.create(schedule=schedule, trigger_key=key, trigger_kind=TriggerKind.MANUAL,
                              workload_class=schedule.workload_class, status=RunStatus.FAILED, queued_at=at,
                              finished_at=at)


def test_the_oldest_run_and_the_latest_prune_are_reported(client, settings, make_schedule):
    settings.ETL_METRICS_TOKEN = "secret-token-123"
    s = _samples(client.get(URL, headers=AUTH))
    assert s[("etl_history_oldest_run_age_seconds", ())] == 0
    assert s[("etl_history_last_prune_age_seconds", ())] == -1
    schedule = make_schedule("orders")
    _run(schedule, "old", timedelta(days=100))
    _run(schedule, "older", timedelta(days=120))
    _run(schedule, "young", timedelta(days=1))
    s = _samples(client.get(URL, headers=AUTH))
    assert 120 * 86400 <= s[("etl_history_oldest_run_age_seconds", ())] < 120 * 86400 + 600
    history_prune(now=timezone.now())
    s = _samples(client.get(URL, headers=AUTH))
    assert s[("etl_history_pruned_rows", (("kind", "runs"),))] == 2
    assert s[("etl_history_pruned_rows", (("kind", "ticks"),))] == 0
    assert 0 <= s[("etl_history_last_prune_age_seconds", ())] < 600
    assert 86400 <= s[("etl_history_oldest_run_age_seconds", ())] < 86400 + 600
