"""Runs under control on the pages: STOPPING, Cancel / Kill now where a run is listed, timed-out runs, commands."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from scheduler.models import AuditEntry, Run, RunStatus, Schedule, StopKind, Team
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.stop import run_cancel, run_stop_request

pytestmark = pytest.mark.django_db


def _page(client, name, *args, htmx=False, **query):
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.get(reverse(f"scheduler:{name}", args=args), query, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


def _stopping(make_run, schedule, *, kind=StopKind.CANCEL, reason="wrong window", actor="user:olivia"):
    run = make_run(schedule, RunStatus.RUNNING)
    assert run_stop_request(run=run, kind=kind, reason=reason, now=timezone.now(), actor=actor)
    return run


@pytest.fixture
def theirs(make_schedule, default_team):
    schedule = make_schedule("theirs-ledger")
    Schedule.objects.filter(pk=schedule.pk).update(owner=Team.objects.create(name="payments"))
    schedule.refresh_from_db()
    return schedule


# --- the run page ---------------------------------------------------------------------------------------------

def test_a_stopping_run_shows_stopping_with_its_kind_reason_asker_and_the_slot_it_holds(
        viewer_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"), reason="loads the wrong window")
    page = _page(viewer_client, "run_detail", run.pk)
    assert 'class="status s-stopping" id="run-status"' in page and ">STOPPING<" in page
    assert 'id="stopping"' in page and "<strong>Cancelled</strong>, asked" in page and "by olivia" in page
    assert '<span id="stop-reason">loads the wrong window</span>' in page
    assert "It still holds its standard slot" in page and "then it becomes CANCELLED" in page
    assert "its process is killed" in page  # what happens past the grace
    assert "Following the log while the run is stopping" in page


def test_a_timeout_in_progress_says_it_will_fail_and_be_queued_again(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders", retry_max_attempts=3), RunStatus.RUNNING, max_attempts=3)
    run_stop_request(run=run, kind=StopKind.TIMEOUT, reason="timed out after 30 s", now=timezone.now())
    page = _page(viewer_client, "run_detail", run.pk)
    assert "<strong>Timed out</strong>" in page and "timed out after 30 s" in page
    assert "then it becomes FAILED and is queued again (attempt 2 of 3)" in page


def test_the_live_part_of_a_stopping_run_carries_the_stop_and_kill_now(operator_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"))
    live = _page(operator_client, "run_detail", run.pk, htmx=True)
    assert 'id="stopping"' in live and 'id="kill-form"' in live and 'id="cancel-form"' not in live
    assert 'data-confirm="Kill run' in live and 'name="force" value="1"' in live
    assert 'hx-trigger="every 2s' in live  # it keeps refreshing until the run is final


def test_a_run_page_of_a_running_run_offers_cancel_and_no_stop_section(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    page = _page(operator_client, "run_detail", run.pk)
    assert ">RUNNING<" in page and 'id="stopping"' not in page
    assert 'id="cancel-form"' in page and 'id="kill-form"' not in page


def test_a_kill_in_progress_offers_nothing_more(operator_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"), kind=StopKind.TERMINATE)
    page = _page(operator_client, "run_detail", run.pk)
    assert "<strong>Terminated</strong>" in page and "being killed now" in page
    assert 'id="kill-form"' not in page and 'id="cancel-form"' not in page and 'id="no-kill"' in page


def test_a_viewer_and_another_teams_operator_see_no_cancel_or_kill(
        viewer_client, client, make_user, make_schedule, make_run, theirs):
    stopping = _stopping(make_run, make_schedule("orders"))
    running = make_run(make_schedule("sales"), RunStatus.RUNNING)
    for run in (stopping, running):
        page = _page(viewer_client, "run_detail", run.pk)
        assert reverse("scheduler:run_cancel", args=[run.pk]) not in page
        assert "you may watch but not cancel it" in page
    outsider = make_user("pat", "operator")
    client.force_login(outsider)
    their_stopping = _stopping(make_run, theirs)
    page = _page(client, "run_detail", their_stopping.pk)
    assert reverse("scheduler:run_cancel", args=[their_stopping.pk]) not in page
    assert "Stopping; you may watch but not cancel it." in page


# --- cancelling from the page -----------------------------------------------------------------------------------

def test_cancelling_a_started_running_run_makes_it_stopping_not_cancelled(operator_client, operator, make_schedule,
                                                                          make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), {"reason": "wrong window"},
                                    follow=True)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.stopping and run.shown_status == "STOPPING"
    assert run.stop_kind == StopKind.CANCEL and run.stop_reason == "wrong window" and run.finished_at is None
    page = response.content.decode()
    assert f"Run {run.pk} is stopping: its code was asked to stop" in page
    assert ">STOPPING<" in page and 'id="kill-form"' in page
    assert AuditEntry.objects.filter(action="run.stop.cancel", actor="olivia", target_id=str(run.pk)).exists()


def test_kill_now_escalates_a_pending_cancel_to_terminate(operator_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"))
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), {"force": "1"}, follow=True)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.stop_kind == StopKind.TERMINATE
    assert run.stop_reason == "killed by olivia"
    assert f"Run {run.pk} is being killed" in response.content.decode()
    assert AuditEntry.objects.filter(action="run.stop.terminate", target_id=str(run.pk)).exists()


def test_cancelling_twice_says_it_is_already_stopping_and_changes_nothing(operator_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"), reason="first ask")
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), {"reason": "second"}, follow=True)
    run.refresh_from_db()
    assert run.stop_reason == "first ask" and run.stop_kind == StopKind.CANCEL
    assert f"Run {run.pk} is already stopping (cancelled): first ask." in response.content.decode()


def test_cancelling_a_queued_run_ends_it_at_once(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.QUEUED)
    response = operator_client.post(reverse("scheduler:run_cancel", args=[run.pk]), follow=True)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED and f"Run {run.pk} cancelled." in response.content.decode()


def test_a_viewer_or_another_teams_operator_cannot_cancel_or_kill(viewer_client, client, make_user, make_run,
                                                                  make_schedule, theirs):
    ours = _stopping(make_run, make_schedule("orders"))
    for data in ({}, {"force": "1"}):
        assert viewer_client.post(reverse("scheduler:run_cancel", args=[ours.pk]), data).status_code == 403
    client.force_login(make_user("pat", "operator"))
    their_run = make_run(theirs, RunStatus.RUNNING)
    assert client.post(reverse("scheduler:run_cancel", args=[their_run.pk])).status_code == 403
    ours.refresh_from_db(), their_run.refresh_from_db()
    assert ours.stop_kind == StopKind.CANCEL and their_run.stop_requested_at is None


# --- lists: the pill and the buttons ------------------------------------------------------------------------------

def test_lists_show_stopping_and_offer_cancel_or_kill_to_who_may(operator_client, viewer, make_schedule, make_run):
    schedule = make_schedule("orders")
    stopping, running = _stopping(make_run, schedule), make_run(schedule, RunStatus.RUNNING)
    queued, done = make_run(schedule, RunStatus.QUEUED), make_run(schedule, RunStatus.SUCCEEDED)
    cancel = {r.pk: reverse("scheduler:run_cancel", args=[r.pk]) for r in (stopping, running, queued, done)}
    pages = {
        "runs": _page(operator_client, "runs"),
        "runs (live)": _page(operator_client, "runs", htmx=True),
        "overview": _page(operator_client, "overview"),
        "schedule": _page(operator_client, "schedule_detail", schedule.pk),
    }
    for where, page in pages.items():
        assert f'data-run="{stopping.pk}" data-status="STOPPING"' in page, where
        assert '<span class="status s-stopping">STOPPING</span>' in page, where
        assert f'action="{cancel[stopping.pk]}"' in page and 'data-action="kill"' in page, where
        assert f'action="{cancel[running.pk]}"' in page and f'data-confirm="Cancel run {running.pk}?"' in page, where
        assert f'action="{cancel[done.pk]}"' not in page, where
    for where in ("runs", "schedule"):
        assert f'action="{cancel[queued.pk]}"' in pages[where], where
    viewer_client = Client()
    viewer_client.force_login(viewer)
    for name, args in (("runs", ()), ("overview", ()), ("schedule_detail", (schedule.pk,))):
        page = _page(viewer_client, name, *args)
        assert ">STOPPING<" in page and not any(f'action="{url}"' in page for url in cancel.values()), name


def test_a_list_offers_no_cancel_on_another_teams_runs(operator_client, make_schedule, make_run, theirs):
    mine, their_run = make_run(make_schedule("orders"), RunStatus.RUNNING), make_run(theirs, RunStatus.RUNNING)
    page = _page(operator_client, "runs", team="all")
    assert f'action="{reverse("scheduler:run_cancel", args=[mine.pk])}"' in page
    assert f'action="{reverse("scheduler:run_cancel", args=[their_run.pk])}"' not in page


def test_the_runs_list_asks_no_more_queries_for_more_cancellable_runs(operator_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    # one of each kind from the start: a queued run's wait reason is one read for any number of them
    _stopping(make_run, schedule), make_run(schedule, RunStatus.RUNNING), make_run(schedule, RunStatus.QUEUED)

    def count():
        with CaptureQueriesContext(connection) as queries:
            _page(operator_client, "runs")
        return len(queries)

    few = count()
    for _ in range(5):
        _stopping(make_run, schedule)
        make_run(schedule, RunStatus.QUEUED)
    assert count() == few


def test_the_timeline_draws_a_stopping_run_apart(viewer_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"))
    Run.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(minutes=5))
    page = _page(viewer_client, "timeline")
    assert f'data-run="{run.pk}" data-status="stopping"' in page and "tl-bar t-stopping" in page


# --- timed out, command targets -------------------------------------------------------------------------------------

@pytest.mark.parametrize("reason, shown", [
    ("timed out after 30 s", True),
    ("node 'load' timed out after 5 s", True),
    ("ValueError: the run timed out after all", False),
])
def test_a_run_that_ran_past_its_limit_is_marked_timed_out(viewer_client, make_schedule, make_run, reason, shown):
    run = make_run(make_schedule("orders", timeout_seconds=30), RunStatus.FAILED, reason=reason)
    page = _page(viewer_client, "run_detail", run.pk)
    assert ('id="timed-out"' in page) is shown
    assert '<dd id="time-limit">30 s per attempt</dd>' in page


def test_a_command_runs_page_shows_its_argv_cwd_env_names_and_exit_code(viewer_client, make_schedule, make_run):
    schedule = make_schedule("export", target_kind="command", target_id="",
                             command={"argv": ["/usr/bin/pg_dump", "--table", "orders items"], "cwd": "/srv/etl",
                                      "env": {"PGHOST": "db", "PGPASSWORD": "hunter2"}})
    run = make_run(schedule, RunStatus.FAILED, exit_code=3, reason="exit code 3")
    page = _page(viewer_client, "run_detail", run.pk)
    assert "<code>/usr/bin/pg_dump --table &#x27;orders items&#x27;</code>" in page and "argv, no shell" in page
    assert '<dd id="command-cwd"><code>/srv/etl</code></dd>' in page
    assert "<code>PGHOST</code> <code>PGPASSWORD</code>" in page and "hunter2" not in page
    assert '<dd id="exit-code">3</dd>' in page
    killed = make_run(schedule, RunStatus.CANCELLED, exit_code=-9)
    assert '<dd id="exit-code">-9 (killed by SIGKILL)</dd>' in _page(viewer_client, "run_detail", killed.pk)
    running = make_run(schedule, RunStatus.RUNNING)
    assert '<dd id="exit-code">—</dd>' in _page(viewer_client, "run_detail", running.pk)


def test_a_shell_command_is_shown_as_written(viewer_client, make_schedule, make_run):
    schedule = make_schedule("nightly", target_kind="command", target_id="",
                             command={"shell": "cd /srv && ./nightly.sh | tee out.log"})
    page = _page(viewer_client, "run_detail", make_run(schedule, RunStatus.SUCCEEDED, exit_code=0).pk)
    assert "<code>cd /srv &amp;&amp; ./nightly.sh | tee out.log</code>" in page and "run by /bin/sh" in page
    assert "the worker's" in page and '<dd id="exit-code">0</dd>' in page


def test_the_schedule_page_shows_the_time_limit_the_deadline_and_the_command(viewer_client, make_schedule):
    schedule = make_schedule("export", target_kind="command", target_id="", timeout_seconds=900,
                             deadline_seconds=3600, command={"argv": ["/usr/local/bin/export", "--all"]})
    page = _page(viewer_client, "schedule_detail", schedule.pk)
    assert '<dd id="timeout">15 min 0 s per attempt</dd>' in page
    assert "1 h 0 min after its logical time alerts its team" in " ".join(page.split())
    assert "<code>/usr/local/bin/export --all</code>" in page
    plain = _page(viewer_client, "schedule_detail", make_schedule("orders").pk)
    assert 'id="command"' not in plain and '<dd id="timeout"><span class="muted">none</span></dd>' in plain


def test_a_finished_cancel_of_a_stopping_run_is_final_and_offers_no_cancel(operator_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"))
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED, finished_at=timezone.now(), reason="wrong window")
    page = _page(operator_client, "run_detail", run.pk)
    assert ">CANCELLED<" in page and 'id="stopping"' not in page and 'id="kill-form"' not in page
    with pytest.raises(ServiceError, match="already CANCELLED"):
        run.refresh_from_db()
        run_cancel(run=run, actor="tests")


def test_a_run_stopping_for_its_timeout_can_be_killed_now(operator_client, make_schedule, make_run):
    run = _stopping(make_run, make_schedule("orders"), kind=StopKind.TIMEOUT)
    page = _page(operator_client, "run_detail", run.pk)
    assert 'id="kill-form"' in page and 'id="no-kill"' not in page
