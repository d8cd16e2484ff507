"""A session that ends under an open page (expired, or signed out in another tab): the next poll takes the browser to
the login page as a whole page, never into the live part, and signing in comes back to the page. A page whose CSRF
token went stale (signed in again in another tab) says so instead of acting."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.sessions.models import Session
from playwright.sync_api import expect

from scheduler.models import ApiToken, RunStatus
from scheduler.views.signin import STALE_HTMX
from tests.browser.helpers import mark_page, not_reloaded

pytestmark = pytest.mark.django_db(transaction=True)


def _is_poll(response) -> bool:
    return response.request.headers.get("hx-request") == "true"


def _sign_in(page, user) -> None:
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", f"pw-{user.username}-x9!")
    page.click("button[type=submit]")


def test_a_poll_after_the_session_ended_loads_the_login_page_and_signing_in_comes_back(
    login, page, server, operator, make_schedule, make_run, shot
):
    make_run(make_schedule("orders-sync"), RunStatus.RUNNING)
    login(operator)
    where = "/runs/?team=all"
    page.goto(where)
    table = page.locator("#runs-table")
    expect(table.locator("tr[data-run]")).to_have_count(1)
    with page.expect_response(lambda r: _is_poll(r) and r.status in (200, 304), timeout=20_000):
        pass  # the live part polls while signed in
    mark_page(page)

    Session.objects.all().delete()  # the session ends on the server (expiry, or a sign-out in another tab)
    with page.expect_response(lambda r: _is_poll(r) and r.status == 401, timeout=20_000) as refused:
        pass
    assert refused.value.header_value("hx-redirect").startswith("/accounts/login/")
    page.wait_for_url(lambda url: urlsplit(url).path == "/accounts/login/")
    assert not not_reloaded(page), "the login page must be loaded as a whole page, not swapped into the table"
    assert parse_qs(urlsplit(page.url).query)["next"] == [where]
    expect(page.locator("#runs-table")).to_have_count(0)
    expect(page.locator("input[name=password]")).to_have_count(1)
    expect(page.locator("h1")).to_have_text("Log in")
    shot("signed-out-poll-login")

    _sign_in(page, operator)
    page.wait_for_url(f"{server.url}{where}")
    expect(table.locator("tr[data-run]")).to_have_count(1)
    expect(table.locator("input[name=password]")).to_have_count(0)


def test_an_htmx_form_with_a_stale_token_reloads_the_page_and_says_nothing_was_done(login, page, operator):
    login(operator)
    page.goto("/preferences/tokens/")
    mark_page(page)
    # signed out and in again in another tab: the login rotates the CSRF token this page holds
    other = page.context.new_page()
    other.goto("/")
    other.click("form.logout button[type=submit]")
    other.wait_for_url(lambda url: "/accounts/login" in url)
    _sign_in(other, operator)
    other.wait_for_url(lambda url: "/accounts/login" not in url)
    other.close()

    page.fill("input[name=name]", "nightly-export")
    with page.expect_response(lambda r: _is_poll(r) and r.status == 403):
        page.click("#token-form button[type=submit]")
    expect(page.locator(".messages li")).to_have_text(STALE_HTMX)
    assert not not_reloaded(page), "the page is reloaded with a fresh token"
    assert not ApiToken.objects.filter(name="nightly-export").exists()
    expect(page.locator("#tokens")).not_to_contain_text("403")

    page.fill("input[name=name]", "nightly-export")  # with the fresh token it works
    with page.expect_response(lambda r: _is_poll(r) and r.request.method == "POST") as created:
        page.click("#token-form button[type=submit]")
    assert created.value.status == 200
    expect(page.locator("#tokens tbody")).to_contain_text("nightly-export")
    assert ApiToken.objects.filter(name="nightly-export").count() == 1
