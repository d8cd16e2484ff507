"""Playwright driving Debian's Chromium against pytest-django's live server."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.views.conftest import make_run  # noqa: F401  (the run factory, shared)

# Playwright's sync API runs an event loop in this thread; Django's ORM calls from
# the test body are still synchronous, so the async-safety check does not apply.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("ETL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def groups(transactional_db):
    """The flush after a transactional test drops migration 0002's groups; put them back the same way."""
    from importlib import import_module

    from django.contrib.auth.models import Group, Permission

    from scheduler.models import WorkloadClass

    spec = import_module("scheduler.migrations.0002_groups_and_classes")
    crud = [f"{a}_{m}" for m in spec.CRUD_MODELS for a in ("add", "change", "delete")]
    for name, codenames in [
        ("viewer", spec.VIEW),
        ("operator", spec.VIEW + spec.OPERATE),
        ("admin", spec.VIEW + spec.OPERATE + crud),
    ]:
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(Permission.objects.filter(content_type__app_label="scheduler", codename__in=codenames))
    for name, limit in [("standard", 4), ("heavy", 1), ("critical", 2)]:
        WorkloadClass.objects.get_or_create(name=name, defaults={"concurrency_limit": limit})


@pytest.fixture
def now():
    """The wall clock: the live server and the pages read it, so fixture data should too."""
    from django.utils import timezone

    return timezone.now()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def login(page):
    def do(user):
        page.goto("/accounts/login/")
        page.fill("input[name=username]", user.username)
        page.fill("input[name=password]", f"pw-{user.username}-x9!")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/accounts/login" not in url)
        return page

    return do


@pytest.fixture
def shot(page):
    """shot(name): a full-page screenshot under test-artifacts/screenshots/ (CI keeps it, git ignores it)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if os.environ.get("ETL_UPDATE_DOC_SCREENSHOTS"):
            docs = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
            docs.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, docs / path.name)
        return path

    return take
