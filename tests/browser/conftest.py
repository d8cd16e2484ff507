"""Playwright driving Debian's Chromium against the server exactly as `make run` starts it.

The server is `manage.py serve` in a child process (gunicorn, DEBUG off, static
files collected and served by WhiteNoise) on the test database, not pytest's
live server, which serves static files by itself and so hides a missing asset.
It runs with `--no-cluster`: the tests drive the run path by hand.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.cluster import ROOT, answers, child_database_url, wait_until
from tests.throwaway import free_port
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
    """The flush after a transactional test drops the migrations' groups and classes; put them back the same way."""
    from tests.conftest import restore_migration_data

    restore_migration_data()


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


@dataclass
class Server:
    url: str
    log_path: Path


@pytest.fixture(scope="session")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    """`manage.py serve --no-cluster` on a free port against the test database, for the whole session."""
    with django_db_blocker.unblock():
        database_url = child_database_url()
    port = free_port()
    work = tmp_path_factory.mktemp("serve")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DEBUG": "false",
        "STATIC_ROOT": str(work / "static"),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = work / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--no-cluster", "--addr", f"127.0.0.1:{port}", "--grace", "5"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or answers(f"{url}/accounts/login/"), timeout=90,
                   what="manage.py serve", log_path=log_path)
        if proc.poll() is not None:
            pytest.fail(f"manage.py serve exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
        yield Server(url=url, log_path=log_path)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


@pytest.fixture
def page(browser, server):
    context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def phone(browser, server):
    """A page at a phone's width (390 px), touch and all."""
    context = browser.new_context(
        base_url=server.url, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture(scope="session")
def demo_dir(tmp_path_factory):
    """Where setup_demo writes its demo databases and logins file in the browser tests (made once a session)."""
    return tmp_path_factory.mktemp("demo")


@pytest.fixture
def demo(settings, demo_dir):
    """`setup_demo` as `make run` runs it, on the test database: {"operator": password, "admin": password}, read
    from what it printed. The browser tests log in as these users, not as users they made."""
    import re
    from io import StringIO

    from django.core.management import call_command

    settings.ETL_DEMO_SOURCE_DB = str(demo_dir / "source.sqlite3")
    settings.ETL_DEMO_WAREHOUSE_DB = str(demo_dir / "warehouse.sqlite3")
    settings.ETL_DEMO_REPORT_DIR = str(demo_dir / "reports")
    settings.ETL_DEMO_LOGINS_FILE = str(demo_dir / "demo-logins.txt")
    out = StringIO()
    call_command("setup_demo", "--no-kickoff", stdout=out)
    found = dict(re.findall(r"login: (\w+) / (\S+)", out.getvalue()))
    assert set(found) == {"operator", "admin"}, out.getvalue()
    return found


@pytest.fixture
def login_demo(page, demo):
    """login_demo("operator", on=page): log in with the password setup_demo printed."""
    def do(username, on=None):
        on = on or page
        on.goto("/accounts/login/")
        on.fill("input[name=username]", username)
        on.fill("input[name=password]", demo[username])
        on.click("button[type=submit]")
        on.wait_for_url(lambda url: "/accounts/login" not in url)
        return on

    return do


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


def _screenshot(on, name: str) -> Path:
    """A full-page screenshot under test-artifacts/screenshots/; copied into docs/screenshots/ with
    ETL_UPDATE_DOC_SCREENSHOTS=1."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    on.screenshot(path=str(path), full_page=True)
    if os.environ.get("ETL_UPDATE_DOC_SCREENSHOTS"):
        docs = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, docs / path.name)
    return path


@pytest.fixture
def shot_of():
    """shot_of(page, name): like `shot`, for another page (the phone one)."""
    return _screenshot


@pytest.fixture
def shot(page):
    """shot(name): a full-page screenshot of the test's page (CI keeps it, git ignores it)."""
    return lambda name: _screenshot(page, name)
