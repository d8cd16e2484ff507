"""Issue 37, points 6 and 7, measured in Chromium at 1,366 px and at a phone's 390 px, as the demo operator: the
schedules list fits its card (its switch inside it), and a run's actions sit above the fold, over the evidence."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import RunLogLine, RunStatus, Schedule

pytestmark = pytest.mark.django_db(transaction=True)

TRACEBACK = ('Traceback (most recent call last):\n' + "".join(
    f'  File "/srv/etl/step{i}.py", line {i}, in step{i}\n    step{i + 1}()\n' for i in range(30))
    + "EtlError: demo.flaky failed on purpose\n")


@pytest.fixture
def wide(browser, server):
    """A laptop's screen: 1,366 × 768."""
    context = browser.new_context(base_url=server.url, viewport={"width": 1366, "height": 768})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def _busy_history(make_run):
    """Every demo schedule with a full strip of recent runs, as after the demo has run a while (the list's widest)."""
    now = timezone.now()
    statuses = [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SUCCEEDED, RunStatus.BLOCKED, RunStatus.SKIPPED]
    for schedule in Schedule.objects.all():
        for i in range(20):
            at = now - timedelta(minutes=40 - i)
            make_run(schedule, statuses[i % len(statuses)], queued_at=at, started_at=at,
                     finished_at=at + timedelta(seconds=14))


def _inside(inner: dict, outer: dict) -> bool:
    return (inner["x"] >= outer["x"] - 0.5 and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
            and inner["width"] > 0)


def test_the_schedules_list_fits_its_card_at_1366_and_on_a_phone_with_every_switch_inside(
        wide, phone, login_demo, make_run, shot_of):
    _busy_history(make_run)
    login_demo("operator", on=wide)
    wide.goto("/schedules/?team=all")
    card = wide.locator("#schedules").locator("xpath=ancestor::section[contains(@class, 'card')]")
    overflow = wide.evaluate("(() => { const t = document.querySelector('#schedules');"
                             " return t.scrollWidth - t.parentElement.clientWidth; })()")
    assert overflow <= 0, f"the table is {overflow} px wider than its box"
    switches = wide.locator("#schedules td.switch button.toggle")
    assert switches.count() >= 1  # the operator's own team's schedules carry the switch
    box = card.bounding_box()
    for i in range(switches.count()):
        assert _inside(switches.nth(i).bounding_box(), box), f"switch {i} is past the card's edge"
    shot_of(wide, "issue37-schedules-1366")
    login_demo("operator", on=phone)
    phone.goto("/schedules/?team=all")
    first = phone.locator("#schedules td.switch button.toggle").first
    expect(first).to_be_visible()
    assert _inside(first.bounding_box(), {"x": 0, "width": 390})
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_schedule_page_pauses_and_resumes_from_its_top(wide, login_demo):
    flaky = Schedule.objects.get(name="flaky_feed")
    login_demo("operator", on=wide)
    wide.goto(f"/schedules/{flaky.pk}/")
    button = wide.locator("#pause-toggle")
    expect(button).to_have_text("Pause flaky_feed")
    assert button.bounding_box()["y"] + button.bounding_box()["height"] <= 768  # above the fold
    wide.fill("#pause-reason", "source migration tonight")
    wide.once("dialog", lambda dialog: dialog.accept())
    button.click()
    expect(wide.locator("#paused")).to_be_visible()
    assert Schedule.objects.get(pk=flaky.pk).enabled is False
    wide.locator("#pause-toggle").click()  # resume asks nothing
    expect(wide.locator("#pause-toggle")).to_have_text("Pause flaky_feed")
    assert Schedule.objects.get(pk=flaky.pk).enabled is True


def test_a_runs_actions_are_above_the_fold_at_1366_and_on_a_phone(wide, phone, login_demo, make_run, shot_of):
    flaky = Schedule.objects.get(name="flaky_feed")
    failed = make_run(flaky, RunStatus.FAILED, error=TRACEBACK, reason="EtlError: demo.flaky failed on purpose",
                      finished_at=timezone.now())
    RunLogLine.objects.bulk_create([RunLogLine(run=failed, seq=i, at=timezone.now(), level="INFO", source="pipeline",
                                               message=f"read batch {i}") for i in range(1, 60)]
                                   + [RunLogLine(run=failed, seq=60, at=timezone.now(), level="ERROR",
                                                 source="scheduler", message=TRACEBACK.rstrip())])
    running = make_run(flaky, RunStatus.RUNNING, heartbeat_at=timezone.now())
    login_demo("operator", on=wide)
    wide.goto(f"/runs/{failed.pk}/")
    rerun = wide.locator("#rerun")
    expect(rerun).to_be_visible()
    box = rerun.bounding_box()
    assert box["y"] + box["height"] <= 768, f"re-run at y={box['y']}"
    assert wide.locator("text=Traceback (most recent call last)").count() == 1  # once, folded under Error
    expect(wide.locator("#error-summary")).to_have_text("EtlError: demo.flaky failed on purpose")
    shot_of(wide, "issue37-failed-run-1366")
    login_demo("operator", on=phone)
    phone.goto(f"/runs/{running.pk}/")
    cancel = phone.locator("#cancel-form button")
    expect(cancel).to_be_visible()
    box = cancel.bounding_box()
    assert box["y"] + box["height"] <= 844 and _inside(box, {"x": 0, "width": 390}), f"cancel at {box}"
    shot_of(phone, "issue37-phone-cancel")
