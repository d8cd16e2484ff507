"""The demo logins, as `make run` makes them: `setup_demo` on the test database, its printed passwords read back."""
from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from tests.conftest import restore_migration_data


@pytest.fixture
def demo(settings, tmp_path):
    """setup_demo (no kick-off runs); {"operator": password, "admin": password} as it printed them."""
    # the groups as the migrations leave them (the browser conftest's `groups` resets them without the teams
    # migration's grants, such as the admin group's act_for_all_teams)
    restore_migration_data()
    settings.ETL_DEMO_SOURCE_DB = str(tmp_path / "demo_source.sqlite3")
    settings.ETL_DEMO_WAREHOUSE_DB = str(tmp_path / "demo_warehouse.sqlite3")
    out = io.StringIO()
    call_command("setup_demo", "--no-kickoff", stdout=out)
    text = out.getvalue()
    logins = {}
    for name in ("operator", "admin"):
        found = re.search(rf"\b{name} / ([A-Za-z0-9_-]{{8,}})", text)
        assert found, f"setup_demo printed no password for {name}:\n{text}"
        logins[name] = found.group(1)
    return logins


def demo_login(page, user: str, password: str):
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login" not in url)
    return page
