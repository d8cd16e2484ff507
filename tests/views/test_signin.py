"""A session that ended: htmx requests get 401 + HX-Redirect to the login page (never the login page as a fragment),
pages still get a 302, `next` is the page the user was on and only on this site; a stale CSRF token is said so."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse

from scheduler.models import Run, RunStatus
from scheduler.views.signin import STALE_FORM, STALE_HTMX
from tests.views.test_permissions import AUTH_PAGES, OWN_CREDENTIALS, PUBLIC_ASSETS, _urls, world  # noqa: F401

pytestmark = pytest.mark.django_db
LOGIN = "/accounts/login/"
# the JSON status endpoint under /api/ keeps its own answer, as the REST API and /metrics do
OWN_ANSWERS = {"scheduler:api_status"}


def poll(client, url: str, *, current: str | None = None, method: str = "get", **extra):
    headers = {"HX-Request": "true", "HX-Current-URL": current or f"http://testserver{url}"}
    return getattr(client, method)(url, headers=headers, **extra)


def next_of(url: str) -> str | None:
    """The `next` a login URL carries (None without one); the URL itself must be the login page."""
    parts = urlsplit(url)
    assert parts.path == LOGIN and not parts.netloc, url
    return parse_qs(parts.query).get("next", [None])[0]


def assert_sent_to_login(response, *, next_url: str | None):
    assert response.status_code == 401, response.status_code
    assert not response.has_header("Location")  # a redirect would be followed inside the XMLHttpRequest
    assert next_of(response["HX-Redirect"]) == next_url
    body = response.content.decode()
    assert "password" not in body and "<form" not in body and "Log in" not in body


def test_a_poll_without_a_session_sends_the_browser_to_the_login_page_and_back(client, operator):
    page = "/runs/?status=RUNNING&team=all"
    response = poll(client, page)
    assert_sent_to_login(response, next_url=page)

    signed = client.post(
        response["HX-Redirect"],
        {"username": "olivia", "password": "pw-olivia-x9!", "next": next_of(response["HX-Redirect"])},
    )
    assert signed.status_code == 302 and signed["Location"] == page


def test_the_next_page_is_where_the_user_was_not_the_fragment_polled(client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    log = reverse("scheduler:run_log", args=[run.pk]) + "?after=3"
    page = reverse("scheduler:run_detail", args=[run.pk])
    assert_sent_to_login(poll(client, log, current=f"http://testserver{page}#log"), next_url=f"{page}#log")


@pytest.mark.parametrize(
    "current",
    [
        "https://evil.example/runs/",
        "http://evil.example/runs/",
        "http://testserver.evil.example/",
        "http://testserver//evil.example/runs/",
        "http://testserver/\\evil.example",
        "javascript:alert(1)",
        "",
    ],
    ids=[
        "other-host-https",
        "other-host",
        "suffixed-host",
        "protocol-relative-path",
        "backslash",
        "javascript",
        "empty",
    ],
)
def test_an_off_site_current_url_is_refused(client, current):
    response = client.get("/runs/", headers={"HX-Request": "true", "HX-Current-URL": current})
    assert_sent_to_login(response, next_url=None)


def test_without_a_current_url_the_login_page_has_no_next(client):
    assert_sent_to_login(client.get("/", headers={"HX-Request": "true"}), next_url=None)


def test_a_page_asked_for_by_the_browser_still_redirects(client):
    response = client.get("/runs/?status=RUNNING")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/runs/%3Fstatus%3DRUNNING"  # as login_required wrote it
    assert not response.has_header("HX-Redirect")


def test_a_form_sent_by_the_browser_comes_back_to_the_page_it_was_sent_from(client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.QUEUED)
    cancel = reverse("scheduler:run_cancel", args=[run.pk])
    page = reverse("scheduler:run_detail", args=[run.pk])
    response = client.post(cancel, HTTP_REFERER=f"http://testserver{page}")
    assert response.status_code == 302 and next_of(response["Location"]) == page
    response = client.post(cancel, HTTP_REFERER="https://evil.example/")
    assert response.status_code == 302 and next_of(response["Location"]) is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_every_page_and_action_answers_htmx_without_a_session_with_hx_redirect(client, world):  # noqa: F811
    checked = 0
    for name, url in _urls(world):
        if name in OWN_CREDENTIALS | AUTH_PAGES | PUBLIC_ASSETS | OWN_ANSWERS or name.startswith("admin:"):
            continue
        answers = {
            method: poll(client, url, current="http://testserver/schedules/", method=method)
            for method in ("get", "post")
        }
        for method, response in answers.items():
            if response.status_code != 405:  # a GET-only page asked with POST, or an action with GET
                assert_sent_to_login(response, next_url="/schedules/")
        assert any(r.status_code == 401 for r in answers.values()), name
        checked += 1
    assert checked > 30


def test_the_api_and_metrics_answer_htmx_as_they_answer_anyone(client, world, settings):  # noqa: F811
    settings.ETL_METRICS_TOKEN = "a-real-token-000"
    for url in ("/api/v1/runs", "/api/v1/schedules", reverse("scheduler:metrics"), reverse("scheduler:api_status")):
        plain, htmx = client.get(url), poll(client, url)
        assert (htmx.status_code, htmx.get("Content-Type"), htmx.get("Location")) == (
            plain.status_code,
            plain.get("Content-Type"),
            plain.get("Location"),
        ), url
        assert not htmx.has_header("HX-Redirect"), url


@pytest.fixture
def queued_run(make_schedule, make_run):
    return make_run(make_schedule("orders"), RunStatus.QUEUED)


def test_a_stale_csrf_token_on_an_htmx_post_reloads_the_page_with_a_message(operator, queued_run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    page = reverse("scheduler:run_detail", args=[queued_run.pk])
    response = poll(
        client,
        reverse("scheduler:run_cancel", args=[queued_run.pk]),
        current=f"http://testserver{page}",
        method="post",
        data={"csrfmiddlewaretoken": "stale"},
    )
    assert response.status_code == 403 and response["HX-Refresh"] == "true"
    assert response.content == b""  # nothing to swap: htmx reloads the page
    assert Run.objects.get(pk=queued_run.pk).status == RunStatus.QUEUED
    assert STALE_HTMX in client.get(page).content.decode()  # the message, on the reloaded page


def test_a_stale_csrf_token_without_a_session_sends_htmx_to_the_login_page(queued_run):
    client = Client(enforce_csrf_checks=True)
    page = reverse("scheduler:run_detail", args=[queued_run.pk])
    response = poll(
        client, reverse("scheduler:run_cancel", args=[queued_run.pk]), current=f"http://testserver{page}", method="post"
    )
    assert_sent_to_login(response, next_url=page)
    assert Run.objects.get(pk=queued_run.pk).status == RunStatus.QUEUED


def test_a_stale_csrf_token_on_a_form_shows_the_403_page_saying_so(operator, queued_run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(reverse("scheduler:run_cancel", args=[queued_run.pk]), {"csrfmiddlewaretoken": "stale"})
    body = response.content.decode()
    assert response.status_code == 403 and STALE_FORM in body and "Traceback" not in body
    assert not response.has_header("HX-Refresh")
    assert Run.objects.get(pk=queued_run.pk).status == RunStatus.QUEUED
