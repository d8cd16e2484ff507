"""Issue 37: pages nobody should see are styled (404, 500), the overview's empty parts are one line, polls answer
304 when nothing changed, HTML is compressed (not where a secret shows), the "go to run #" box, stale flashes."""
from __future__ import annotations

import gzip
from datetime import timedelta

from django.test import RequestFactory
from django.urls import reverse
from django.views.defaults import server_error

from scheduler.models import RunStatus
from scheduler.views.polls import fragment_etag

RUNS, OVERVIEW = reverse("scheduler:runs"), reverse("scheduler:overview")
POLL = {"HX-Request": "true"}


def test_a_missing_run_is_a_styled_404_that_says_it_may_have_been_pruned(viewer_client):
    response = viewer_client.get("/runs/999999/")
    page = response.content.decode()
    assert response.status_code == 404
    assert "Run #999999 does not exist — it may have been pruned" in page
    assert "scheduler/app" in page and 'id="site-nav"' in page  # our base template, navigation and all
    links = page.split('id="not-found-links"', 1)[1].split("</ul>", 1)[0]
    assert f'href="{OVERVIEW}"' in links and f'href="{RUNS}"' in links


def test_any_unknown_address_gets_the_styled_404(viewer_client):
    response = viewer_client.get("/no/such/page/")
    page = response.content.decode()
    assert response.status_code == 404 and "Page not found" in page and "<code>/no/such/page/</code>" in page
    assert "scheduler/app" in page


def test_the_500_page_is_styled_and_needs_no_request_context(db):
    response = server_error(RequestFactory().get("/"))
    page = response.content.decode()
    # styled by its own <style>: it must render when URLs, static files or the database are what broke
    assert response.status_code == 500 and 'id="server-error"' in page and "<style>" in page
    assert f'href="{OVERVIEW}"' in page and 'id="site-nav"' not in page and "{%" not in page


def test_an_empty_overview_says_so_in_one_line_each(viewer_client):
    page = viewer_client.get(OVERVIEW).content.decode()
    assert '<p class="muted empty-line" id="running">Nothing running.</p>' in page
    assert '<p class="muted empty-line" id="latest">No runs yet.</p>' in page
    assert '<table id="running"' not in page and '<table id="latest"' not in page
    assert '<p class="muted empty-line" id="clusters">No cluster has beaten in the last 30 s.</p>' in page
    assert 'id="retention"' not in page


def test_an_overview_with_runs_keeps_its_tables(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    running = make_run(schedule, RunStatus.RUNNING)
    page = viewer_client.get(OVERVIEW).content.decode()
    assert '<table id="running"' in page and f'data-run="{running.pk}"' in page and '<table id="latest"' in page


# --- polls send only what changed -------------------------------------------------------------------------------

def test_an_unchanged_runs_poll_is_a_304_without_a_body(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    make_run(schedule, RunStatus.SUCCEEDED)
    first = viewer_client.get(RUNS, headers=POLL)
    assert first.status_code == 200 and len(first.content) > 500 and first["ETag"]
    again = viewer_client.get(RUNS, headers={**POLL, "If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == first["ETag"]
    make_run(schedule, RunStatus.FAILED)
    changed = viewer_client.get(RUNS, headers={**POLL, "If-None-Match": first["ETag"]})
    assert changed.status_code == 200 and changed["ETag"] != first["ETag"] and b"FAILED" in changed.content


def test_a_full_page_load_is_never_a_304(viewer_client, make_schedule, make_run):
    make_run(make_schedule("orders"), RunStatus.SUCCEEDED)
    etag = viewer_client.get(RUNS, headers=POLL)["ETag"]
    response = viewer_client.get(RUNS, headers={"If-None-Match": etag})
    assert response.status_code == 200 and not response.has_header("ETag")


def test_an_overview_poll_whose_facts_stand_is_a_304_though_its_ages_grew(viewer_client, make_schedule, make_run,
                                                                          monkeypatch):
    from django.utils import timezone

    schedule = make_schedule("orders")
    run = make_run(schedule, RunStatus.RUNNING, started_at=timezone.now() - timedelta(seconds=30),
                   heartbeat_at=timezone.now() - timedelta(seconds=2))
    first = viewer_client.get(OVERVIEW, headers=POLL)
    assert first.status_code == 200 and b"data-age=" in first.content
    later = timezone.now() + timedelta(seconds=7)  # the elapsed time and the heartbeat's age count on
    monkeypatch.setattr(timezone, "now", lambda: later)
    again = viewer_client.get(OVERVIEW, headers={**POLL, "If-None-Match": first["ETag"]})
    assert again.status_code == 304 and again.content == b""
    run.heartbeat_at = later  # a new heartbeat is a new fact
    run.save(update_fields=["heartbeat_at"])
    beat = viewer_client.get(OVERVIEW, headers={**POLL, "If-None-Match": first["ETag"]})
    assert beat.status_code == 200 and beat["ETag"] != first["ETag"]


def test_the_etag_leaves_out_csrf_tokens_and_ages_but_not_the_facts():
    one = '<input name="csrfmiddlewaretoken" value="aaa"><span data-age="3.1" data-at="X">3.1 s</span> #12'
    two = '<input name="csrfmiddlewaretoken" value="bbb"><span data-age="9.0" data-at="X">9.0 s</span> #12'
    assert fragment_etag(one) == fragment_etag(two)
    assert fragment_etag(one) != fragment_etag(one.replace('data-at="X"', 'data-at="Y"'))
    assert fragment_etag(one) != fragment_etag(one.replace("#12", "#13"))


# --- compressed HTML, except beside a secret ------------------------------------------------------------------

def test_pages_and_polls_are_gzipped(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    for _ in range(20):
        make_run(schedule, RunStatus.SUCCEEDED)
    plain = viewer_client.get(RUNS, headers=POLL)
    packed = viewer_client.get(RUNS, headers={**POLL, "Accept-Encoding": "gzip"})
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    assert gzip.decompress(packed.content) == plain.content
    assert len(packed.content) * 4 < len(plain.content), (len(packed.content), len(plain.content))


def test_a_new_api_token_is_sent_uncompressed(viewer_client):
    response = viewer_client.post(reverse("scheduler:api_tokens"), {"name": "ci"}, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and 'id="token-plaintext"' in response.content.decode()
    assert not response.has_header("Content-Encoding")


# --- go to run #, and a flash that holds only while the run stops ------------------------------------------------

def test_go_to_run_opens_the_run_or_says_what_was_wrong(viewer_client):
    response = viewer_client.get(reverse("scheduler:run_goto"), {"run": " #4213 "})
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:run_detail", args=[4213])
    response = viewer_client.get(reverse("scheduler:run_goto"), {"run": "abc"})
    assert response.status_code == 400
    assert "run: expected a run number such as 4213, got &#x27;abc&#x27;" in response.content.decode()
    response = viewer_client.get(reverse("scheduler:run_goto"))
    assert response.status_code == 200 and 'id="goto-run-page"' in response.content.decode()


def test_every_page_has_the_go_to_run_box(viewer_client):
    page = viewer_client.get(RUNS).content.decode()
    assert f'action="{reverse("scheduler:run_goto")}"' in page and 'id="goto-run"' in page


def test_the_stopping_flash_is_marked_to_go_once_the_run_is_final(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), {"reason": "x"}, follow=True)
    page = response.content.decode()
    assert '<li class="until-final success">' in page and f"Run {run.pk} is stopping" in page


def test_the_apis_json_is_sent_uncompressed(viewer_client, make_schedule):
    # only pages are gzipped: the API's answers carry secrets (a new token) beside text a caller chose (BREACH)
    make_schedule("orders")
    response = viewer_client.get("/api/v1/schedules", headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    assert not response.has_header("Content-Encoding") and response.json()["items"][0]["name"] == "orders"
