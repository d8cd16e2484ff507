"""Every page, served as `make run` serves it: no request fails, the stylesheet and htmx are applied."""

from __future__ import annotations

import pytest

from scheduler.models import RunStatus
from scheduler.services.admission.backfills import backfill_submit

pytestmark = pytest.mark.django_db(transaction=True)
WM = {"type": "integer", "column": "id", "initial": 0}


def _watch(page) -> list[str]:
    """Every response that answered 4xx/5xx and every request that failed outright, as text."""
    bad: list[str] = []
    page.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    # Chromium aborts its own fetch of the icon when the page navigates on before it is read: not a failure
    page.on("requestfailed", lambda r: bad.append(f"failed {r.url}: {r.failure}")
            if not (r.url.endswith("/favicon.svg") and "ERR_ABORTED" in (r.failure or "")) else None)
    # the Content-Security-Policy must not block anything the pages use (Chromium reports it on the console)
    page.on("console", lambda m: bad.append(f"console {m.type}: {m.text}")
            if "Content Security Policy" in m.text or "Content-Security-Policy" in m.text else None)
    return bad


UNLABELLED = """() => [...document.querySelectorAll('input, select, textarea')]
    .filter(el => el.type !== 'hidden' && !(el.labels && el.labels.length)
                  && !el.getAttribute('aria-label') && !el.getAttribute('aria-labelledby'))
    .map(el => el.outerHTML.slice(0, 160))"""


def _styled_and_live(page) -> dict:
    return page.evaluate(
        r"""() => ({
            sheet: [...document.styleSheets].some(s => /\/scheduler\/app\.([0-9a-f]{12}\.)?css$/.test(s.href || '') && s.cssRules.length > 20),
            background: getComputedStyle(document.body).backgroundColor,
            htmx: typeof window.htmx === 'object' && typeof window.htmx.version === 'string',
            morph: typeof window.Idiomorph === 'object',
        })"""
    )


@pytest.fixture
def sample(make_schedule, make_run, now):
    """A little of everything, so each page has rows to render."""
    schedule = make_schedule("orders-sync", watermark_config=WM, description="Nightly orders")
    make_schedule("revenue", depends_on=[schedule], trigger_kind="upstream")
    run = make_run(schedule, RunStatus.FAILED, error="ValueError: bad row", reason="source timed out")
    make_run(schedule, RunStatus.BLOCKED, reason="circuit open", finished_at=now)
    make_run(schedule, RunStatus.SKIPPED, reason="still fresh", finished_at=now)
    backfill = backfill_submit(
        schedule=schedule, start=0, end=30, window=10, reason="reload", requested_by="tests", max_parallel=1
    )
    return {"schedule": schedule, "run": run, "backfill": backfill}


def _pages(sample) -> list[str]:
    return [
        "/",
        "/runs/",
        "/runs/?status=FAILED",
        "/runs/blocked/",
        "/runs/skipped/",
        "/timeline/",
        f"/runs/{sample['run'].pk}/",
        "/timeline/",
        "/schedules/",
        "/schedules/graph/",
        f"/schedules/{sample['schedule'].pk}/",
        f"/schedules/{sample['schedule'].pk}/failures/",
        "/backfills/",
        f"/backfills/{sample['backfill'].pk}/",
        "/audit/",
        "/preferences/",
        "/admin/",
        "/admin/scheduler/schedule/",
        "/admin/auth/user/",
        f"/admin/scheduler/schedule/{sample['schedule'].pk}/change/",
    ]


def test_every_page_loads_with_no_failed_request_and_with_its_stylesheet_and_htmx(
    page, login, make_user, sample
):
    admin = make_user("ada", "admin", is_staff=True)
    bad = _watch(page)
    page.goto("/accounts/login/")
    assert _styled_and_live(page)["sheet"], "the login page has no stylesheet"
    login(admin)
    for path in _pages(sample):
        bad.clear()
        response = page.goto(path)
        page.wait_for_load_state("networkidle")
        assert response.status == 200, f"{path} answered {response.status}"
        assert "script-src 'self' 'unsafe-eval'" in response.headers.get("content-security-policy", ""), path
        assert bad == [], f"{path}: {bad}"
        if not path.startswith("/admin/"):
            state = _styled_and_live(page)
            assert state["sheet"], f"{path}: app.css is not applied"
            assert state["background"] == "rgb(247, 248, 250)", f"{path}: body background {state['background']}"
            assert state["htmx"], f"{path}: htmx is not loaded"
            assert page.evaluate(UNLABELLED) == [], f"{path}: inputs without a label"
            assert page.locator("a.skip-link[href='#main']").count() == 1 and page.locator("main#main").count() == 1
            assert state["morph"], f"{path}: the idiomorph extension is not loaded"


def test_a_page_that_polls_gets_its_update_from_the_served_htmx(page, login, operator, make_schedule, make_run):
    schedule = make_schedule("orders-sync")
    run = make_run(schedule, RunStatus.QUEUED, finished_at=None, started_at=None)
    login(operator)
    page.goto(f"/runs/{run.pk}/")
    with page.expect_request(lambda r: r.headers.get("hx-request") == "true", timeout=15_000):
        pass  # the live part polls by itself: htmx is running, not just present


def test_the_admin_stylesheet_is_served_too(page, login, make_user):
    admin = make_user("ada", "admin", is_staff=True, is_superuser=True)
    login(admin)
    bad = _watch(page)
    page.goto("/admin/")
    page.wait_for_load_state("networkidle")
    assert bad == []
    assert page.evaluate("[...document.styleSheets].some(s => (s.href || '').includes('/static/admin/css/'))")
