"""Freshness objectives and overlap / catch-up policies where the pages and /metrics show them."""
from __future__ import annotations

import html
import re
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from scheduler.models import Run, RunStatus, Schedule


def text_of(response) -> str:
    return re.sub(r"<[^>]+>", "", html.unescape(response.content.decode()))


def _stale(make_schedule):
    schedule = make_schedule("orders", freshness_max_age_seconds=3600)
    long_ago = timezone.now() - timedelta(hours=3)
    Run.objects.create(schedule=schedule, trigger_key="t1", trigger_kind="manual", status=RunStatus.SUCCEEDED,
                       workload_class_id=schedule.workload_class_id, queued_at=long_ago, started_at=long_ago,
                       finished_at=long_ago)
    Schedule.objects.filter(pk=schedule.pk).update(freshness_breached_at=long_ago + timedelta(hours=1))
    return schedule


def test_metrics_report_each_objective_its_age_and_the_breach(client, settings, make_schedule):
    settings.ETL_METRICS_TOKEN = "secret-token-123"
    _stale(make_schedule)
    make_schedule("no-objective")
    response = client.get(reverse("scheduler:metrics"), headers={"Authorization": "Bearer secret-token-123"})
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(response.content.decode()) for s in family.samples}
    assert (
        3 * 3600
        <= samples[("etl_freshness_age_seconds", (("measure", "last_success"), ("schedule", "orders")))]
        < 3 * 3600 + 60
    )
    assert samples[("etl_freshness_objective_seconds", (("schedule", "orders"),))] == 3600
    assert samples[("etl_freshness_breached", (("schedule", "orders"),))] == 1
    assert not any(labels and dict(labels).get("schedule") == "no-objective" for _n, labels in samples)


def test_the_schedule_page_shows_the_breach_and_the_policies(viewer_client, make_schedule):
    schedule = _stale(make_schedule)
    Schedule.objects.filter(pk=schedule.pk).update(overlap_policy="buffer_one", catchup="all", max_catchup=5)
    page = text_of(viewer_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])))
    assert "breached" in page and "is 3 h old (objective 1 h)" in page
    assert "buffer_one · all" in page and "(up to 5)" in page


def test_a_schedule_without_objective_says_so_and_shows_its_default_overlap(viewer_client, make_schedule):
    schedule = make_schedule("plain")
    page = text_of(viewer_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])))
    assert "no objective" in page and "allow_all (default) · latest" in page
