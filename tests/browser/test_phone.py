"""Readable everywhere: at a phone's width (390 px) the navigation folds away and table rows become cards."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler.models import RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


def _login(page, user):
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", f"pw-{user.username}-x9!")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login" not in url)


def _fits(page) -> bool:
    """Nothing makes the page itself scroll sideways (wide pictures scroll inside their card)."""
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_at_phone_width_the_navigation_folds_behind_a_menu_button(phone, operator):
    _login(phone, operator)
    nav, menu = phone.locator("#site-nav"), phone.locator("button.menu-toggle")
    expect(menu).to_be_visible()
    expect(nav).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    expect(nav).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    nav.get_by_role("link", name="Runs").click()
    phone.wait_for_url("**/runs/")
    expect(phone.locator("#site-nav")).to_be_hidden()  # a new page starts folded
    assert _fits(phone)


def test_at_phone_width_run_rows_are_cards_with_status_and_actions_in_view(
    phone, shot_of, operator, make_schedule, make_run
):
    schedule = make_schedule("orders-sync")
    for status in (RunStatus.FAILED, RunStatus.SUCCEEDED, RunStatus.QUEUED):
        make_run(schedule, status, reason="source timed out" if status == RunStatus.FAILED else "")
    queued = make_run(schedule, RunStatus.QUEUED, finished_at=None, started_at=None)
    _login(phone, operator)
    phone.goto("/runs/")
    row = phone.locator(f'#runs-table tr[data-run="{queued.pk}"]')
    expect(row).to_be_visible()
    box = row.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert row.evaluate("r => getComputedStyle(r).display") == "block"
    status = row.locator(".status")
    expect(status).to_be_in_viewport()
    label = status.evaluate("s => getComputedStyle(s.closest('td'), '::before').content")
    assert label == '"Status"', label
    assert _fits(phone)
    shot_of(phone, "phone-runs")

    phone.goto(f"/runs/{queued.pk}/")
    cancel = phone.locator("#cancel-form button")
    cancel.scroll_into_view_if_needed()
    expect(cancel).to_be_in_viewport()  # reachable by scrolling down, never cut off at the side
    box = cancel.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert _fits(phone)


def test_at_desktop_width_tables_stay_tables_and_the_menu_button_is_hidden(page, login, operator, make_schedule,
                                                                          make_run):
    make_run(make_schedule("orders-sync"), RunStatus.SUCCEEDED)
    login(operator)
    page.goto("/runs/")
    expect(page.locator("#site-nav")).to_be_visible()
    expect(page.locator("button.menu-toggle")).to_be_hidden()
    assert page.locator("#runs-table tbody tr").first.evaluate("r => getComputedStyle(r).display") == "table-row"


def test_the_skip_link_is_the_first_stop_and_moves_focus_to_the_content(page, login, operator):
    login(operator)
    page.goto("/runs/")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
