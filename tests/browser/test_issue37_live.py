"""Issue 37 in Chromium at 1366 and 390 px: a page that lost its server says so (4), no stale text after live
updates (10), polls answered 304 (15), targets, focus ring, status marks and keyboard shortcuts (16)."""
from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler.models import Run, RunLogLine, RunStatus
from tests.browser.helpers import mark_page, not_reloaded

pytestmark = pytest.mark.django_db(transaction=True)
WIDE, PHONE = {"width": 1366, "height": 768}, {"width": 390, "height": 844}


def _open(browser, server, user, viewport):
    mobile = viewport["width"] < 640
    context = browser.new_context(base_url=server.url, viewport=viewport, is_mobile=mobile, has_touch=mobile)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", f"pw-{user.username}-x9!")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login" not in url)
    return page


@pytest.fixture
def open_at(browser, server, operator):
    """open_at(viewport): a page of its own at that size, logged in as the operator."""
    pages = []

    def do(viewport):
        pages.append(_open(browser, server, operator, viewport))
        return pages[-1]

    yield do
    for page in pages:
        page.context.close()


@pytest.fixture
def wide(open_at):
    return open_at(WIDE)


@pytest.fixture
def narrow(browser, server, operator):
    page = _open(browser, server, operator, PHONE)
    yield page
    page.context.close()


def _is_poll(response) -> bool:
    return response.request.headers.get("hx-request") == "true"


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1366", "390"])
def test_polls_answer_304_and_a_lost_server_is_said_until_it_answers(open_at, viewport, shot_of, make_schedule,
                                                                     make_run):
    page = open_at(viewport)
    make_run(make_schedule("orders-sync"), RunStatus.RUNNING)
    page.goto("/")
    # the facts stand (the run's start, its last heartbeat): after the first poll, nothing but a 304 and no body
    with page.expect_response(lambda r: _is_poll(r) and r.status == 304, timeout=20_000) as answer:
        pass
    assert answer.value.request.sizes()["responseBodySize"] == 0  # the bytes of an unchanged poll
    age = page.locator("#running [data-age]").first
    before = age.text_content()
    expect(age).not_to_have_text(before)  # the elapsed time counts on by itself between answers

    page.route("**/*", lambda route: route.abort())
    banner = page.locator("#connection-lost")
    expect(banner).to_be_visible(timeout=20_000)
    expect(banner).to_have_text(re.compile(r"Connection lost .*showing data from \d\d:\d\d:\d\d"))
    assert page.evaluate("document.documentElement.classList.contains('offline')")
    assert page.evaluate("getComputedStyle(document.querySelector('#running [data-age]')).fontStyle") == "italic"
    if viewport is WIDE:
        shot_of(page, "connection-lost")
    else:
        assert page.locator("#connection-lost").bounding_box()["width"] <= PHONE["width"]

    page.unroute("**/*")
    expect(banner).to_have_count(0, timeout=20_000)
    assert not page.evaluate("document.documentElement.classList.contains('offline')")


@pytest.mark.parametrize("viewport", [WIDE, PHONE], ids=["1366", "390"])
def test_no_stale_text_after_live_updates(open_at, viewport, make_schedule, make_run):
    page = open_at(viewport)
    run = make_run(make_schedule("orders-sync"), RunStatus.RUNNING, reason="")
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("#log-empty")).to_have_text("No lines yet.")
    expect(page.locator(".log-box")).to_be_hidden()  # an empty log draws no black bar
    RunLogLine.objects.create(run=run, seq=1, at=timezone.now(), level="INFO", source="pipeline", message="read 10")
    expect(page.locator("#log-lines li")).to_have_count(1)
    expect(page.locator(".log-box")).to_be_visible()
    expect(page.locator("#log-empty")).to_be_hidden()

    page.fill("#cancel-reason", "wrong window")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-form button")
    flash = page.locator(".messages li.until-final")
    expect(flash).to_contain_text(f"Run {run.pk} is stopping")
    mark_page(page)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED, finished_at=timezone.now())
    expect(page.locator("#run-status")).to_have_text("CANCELLED")
    expect(flash).to_have_count(0)
    assert not_reloaded(page)


TARGETS = """() => [...document.querySelectorAll(
    'main button, main a.button, main select, main input:not([type=hidden]), main summary, main td a, main nav a,'
    + ' header a, header button, header input')]
    .filter(el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0
                    && getComputedStyle(el).visibility !== 'hidden'; })
    .map(el => ({what: el.outerHTML.slice(0, 90), height: el.getBoundingClientRect().height}))"""


def _contrast(css_colour: str) -> float:
    r, g, b = (int(v) for v in re.findall(r"\d+", css_colour)[:3])

    def channel(c):
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)
    return 1.05 / (lum + 0.05)  # against white (luminance 1)


def test_targets_are_24px_at_390_and_the_focus_ring_stands_out(narrow, shot_of, make_schedule, make_run):
    page = narrow
    schedule = make_schedule("orders-sync")
    make_run(schedule, RunStatus.FAILED)
    running = make_run(schedule, RunStatus.RUNNING)
    for path in ("/", "/runs/", f"/runs/{running.pk}/"):
        page.goto(path)
        page.click(".menu-toggle")  # the folded navigation's links count too
        small = [t for t in page.evaluate(TARGETS) if t["height"] < 24]
        assert not small, (path, small)
    page.goto("/")
    cancel = page.locator(f'#running-{running.pk} button[data-action="cancel"]').bounding_box()
    assert cancel["height"] >= 24
    shot_of(page, "phone-overview")
    page.keyboard.press("Shift")  # the last input was the keyboard: a focused element shows its ring
    page.locator("main a").first.focus()
    ring = page.evaluate("(() => { const s = getComputedStyle(document.activeElement);"
                         " return {colour: s.outlineColor, style: s.outlineStyle, width: s.outlineWidth}; })()")
    assert ring["style"] == "solid" and float(ring["width"].rstrip("px")) >= 2
    assert _contrast(ring["colour"]) >= 3, ring


def test_status_is_never_colour_alone_and_the_keyboard_goes_places(wide, make_schedule, make_run):
    page = wide
    schedule = make_schedule("orders-sync")
    failed = make_run(schedule, RunStatus.FAILED)
    page.goto("/schedules/graph/")
    expect(page.locator('#graph a[data-schedule="orders-sync"] tspan.glyph')).to_have_text("✕")
    page.goto("/schedules/")
    tick = page.locator(".strip .t-failed").first
    assert "gradient" in tick.evaluate("el => getComputedStyle(el).backgroundImage")

    page.goto("/")
    page.keyboard.press("/")
    expect(page.locator("#goto-run")).to_be_focused()
    page.keyboard.type("gr")  # typed into the box: no shortcut fires
    assert page.url.rstrip("/").endswith(page.url.split("/", 3)[2]) or page.url.endswith("/")
    expect(page.locator("#goto-run")).to_have_value("gr")
    page.fill("#goto-run", str(failed.pk))
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/runs/{failed.pk}/")
    page.keyboard.press("g")
    page.keyboard.press("r")
    page.wait_for_url("**/runs/")
    page.keyboard.press("?")
    expect(page.locator("dialog#shortcuts")).to_be_visible()
    expect(page.locator("dialog#shortcuts")).to_contain_text("Runs")
    page.keyboard.press("Escape")
    expect(page.locator("dialog#shortcuts")).to_be_hidden()
