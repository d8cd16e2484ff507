"""A page never renders more than a bounded number of rows, whatever the history (issue 25).

The pages whose lists grow with history (what a prune keeps small) render the same number of rows whether the
ledger holds a little more than a page or twice as much.
"""
from __future__ import annotations

from datetime import timedelta
from itertools import count
from unittest import mock

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduler import timeline

from scheduler.models import AuditEntry, Backfill, Run, RunStatus, TriggerKind
from scheduler.services.common.audit import audit_build, audit_record_many

_keys = count(1)


def _history(schedule, now, n):
    runs = []
    for i in range(n):
        at = now - timedelta(minutes=n - i)
        for status in (RunStatus.FAILED, RunStatus.BLOCKED, RunStatus.SKIPPED):
            runs.append(Run(schedule=schedule, trigger_key=f"h{next(_keys)}", trigger_kind=TriggerKind.MANUAL,
                            workload_class_id=schedule.workload_class_id, status=status, queued_at=at,
                            finished_at=at, reason="x"))
    Run.objects.bulk_create(runs)
    audit_record_many([audit_build(actor="tests", action="run.trigger", target=("run", i), at=now)
                       for i in range(n)])
    Backfill.objects.bulk_create([Backfill(schedule=schedule, range_from="1", range_to="2", window_size="1",
                                           reason="r", requested_by="tests", created_at=now) for _ in range(n)])


PAGES = {
    "overview": (lambda s: reverse("scheduler:overview"), 'data-run="'),
    "runs": (lambda s: reverse("scheduler:runs"), 'data-run="'),
    "blocked": (lambda s: reverse("scheduler:blocked"), 'data-run="'),
    "skipped": (lambda s: reverse("scheduler:skipped"), 'data-run="'),
    "schedule": (lambda s: reverse("scheduler:schedule_detail", args=[s.pk]), 'data-run="'),
    "schedules": (lambda s: reverse("scheduler:schedules"), "<a "),
    "audit": (lambda s: reverse("scheduler:audit"), "<tr"),
    "backfills": (lambda s: reverse("scheduler:backfills"), 'data-backfill="'),
}


@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_page_renders_as_many_rows_at_twice_the_history(admin_client, make_schedule, page):
    schedule = make_schedule("orders")
    url, marker = PAGES[page][0](schedule), PAGES[page][1]
    real_now = timezone.now()
    _history(schedule, real_now, 120)
    first = admin_client.get(url)
    assert first.status_code == 200
    rows = first.content.decode().count(marker)
    _history(schedule, real_now, 120)
    again = admin_client.get(url).content.decode().count(marker)
    assert again == rows, f"{page}: {rows} rows at 360 runs, {again} at 720"
    assert Run.objects.count() == 720 and AuditEntry.objects.filter(action="run.trigger").count() == 240


def test_the_timeline_draws_at_most_its_limit_of_runs(admin_client, make_schedule):
    """The timeline's range holds every run of the hours asked for: it stops at the selector's limit (3000)."""
    assert timeline.runs.__kwdefaults__["limit"] == 3000
    schedule = make_schedule("orders")
    _history(schedule, timezone.now(), 60)  # 180 runs in the last hour
    with mock.patch.dict(timeline.runs.__kwdefaults__, {"limit": 100}):
        page = admin_client.get(reverse("scheduler:timeline") + "?hours=48").content.decode()
    assert page.count('data-run="') == 100
