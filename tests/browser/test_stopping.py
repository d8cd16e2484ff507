"""A run asked to stop, in a real browser: Cancel after confirming, STOPPING while its work ends, then CANCELLED."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Run, RunStatus, StopKind
from tests.browser.helpers import mark_page, not_reloaded

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancelling_a_running_run_shows_it_stopping_until_its_work_ends(
    page, login, shot, operator, make_schedule, make_run
):
    run = make_run(make_schedule("orders-sync"), RunStatus.RUNNING, reason="")
    login(operator)
    page.goto(f"/runs/{run.pk}/")
    page.fill("#cancel-reason", "loads the wrong window")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-form button")

    expect(page.locator(".messages")).to_contain_text(f"Run {run.pk} is stopping")
    expect(page.locator("#run-status")).to_have_text("STOPPING")
    expect(page.locator("#stopping")).to_contain_text("loads the wrong window")
    expect(page.locator("#slot-held")).to_contain_text("still holds its standard slot")
    expect(page.locator("#kill-form")).to_be_visible()
    expect(page.locator("#cancel-form")).to_have_count(0)
    row = Run.objects.get(pk=run.pk)
    assert row.status == RunStatus.RUNNING and row.stop_kind == StopKind.CANCEL
    shot("run-stopping")

    mark_page(page)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED, finished_at=timezone.now(),
                                         reason="loads the wrong window")
    expect(page.locator("#run-status")).to_have_text("CANCELLED")  # the live part, not a reload
    expect(page.locator("#stopping")).to_have_count(0)
    expect(page.locator("#kill-form")).to_have_count(0)
    assert not_reloaded(page)


def test_the_runs_list_shows_stopping_and_offers_kill_now(page, login, shot, operator, make_schedule, make_run):
    schedule = make_schedule("orders-sync")
    make_run(schedule, RunStatus.SUCCEEDED)
    running = make_run(schedule, RunStatus.RUNNING)
    run = make_run(schedule, RunStatus.RUNNING, stop_requested_at=timezone.now(), stop_kind=StopKind.CANCEL,
                   stop_reason="wrong window")
    login(operator)
    page.goto("/runs/")
    row = page.locator(f"#run-row-{run.pk}")
    expect(row.locator(".status")).to_have_text("STOPPING")
    expect(page.locator(f'#run-row-{running.pk} button[data-action="cancel"]')).to_be_visible()
    shot("runs-stopping")
    page.once("dialog", lambda dialog: dialog.dismiss())
    row.locator('button[data-action="kill"]').click()
    expect(row).to_be_visible()
    assert Run.objects.get(pk=run.pk).stop_kind == StopKind.CANCEL  # declined: nothing changed
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator('button[data-action="kill"]').click()
    expect(page.locator(".messages")).to_contain_text(f"Run {run.pk} is being killed")
    assert Run.objects.get(pk=run.pk).stop_kind == StopKind.TERMINATE
