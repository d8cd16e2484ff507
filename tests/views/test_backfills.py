from __future__ import annotations

import re

from django.urls import reverse
from django.utils import timezone

from scheduler.models import (
    AuditEntry, Backfill, BackfillStatus, BackfillWindow, Run, RunStatus, TriggerKind, WindowStatus,
)

WM = {"type": "integer", "column": "id", "initial": 0}


def _submit(client, schedule, **overrides):
    data = {
        "schedule": schedule.name,
        "range_from": "0",
        "range_to": "40",
        "window_size": "10",
        "max_parallel": "2",
        "reason": "reload after fix",
        **overrides,
    }
    return client.post(reverse("scheduler:backfill_submit"), data)


def test_an_operator_submits_a_backfill_and_lands_on_its_grid(operator_client, operator, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = _submit(operator_client, schedule)
    backfill = Backfill.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("scheduler:backfill_detail", args=[backfill.pk])
    assert backfill.total_windows == 4 and backfill.requested_by == operator.username
    assert AuditEntry.objects.filter(action="backfill.submit", actor=operator.username).exists()


def test_a_bad_window_names_the_field_and_creates_nothing(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = _submit(operator_client, schedule, window_size="ten")
    assert response.status_code == 400
    assert response.context["form"].errors["window_size"]
    assert not Backfill.objects.exists()


def test_a_schedule_without_watermark_is_refused_on_the_schedule_field(operator_client, make_schedule):
    schedule = make_schedule("orders")
    response = _submit(operator_client, schedule)
    assert response.status_code == 400 and "has no watermark" in response.context["form"].errors["schedule"][0]


def test_the_list_shows_progress_per_backfill(viewer_client, make_schedule):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="30", window="10", reason="r", requested_by="tests")
    BackfillWindow.objects.filter(backfill=backfill, seq=0).update(status=WindowStatus.SUCCEEDED)
    BackfillWindow.objects.filter(backfill=backfill, seq=1).update(status=WindowStatus.FAILED)
    response = viewer_client.get(reverse("scheduler:backfills"))
    row = response.context["backfills"][0]
    assert (row.n_done, row.n_failed, row.n_running) == (1, 1, 0)
    assert '<progress max="3" value="1">' in response.content.decode()


def test_pause_resume_cancel_go_through_the_services(operator_client, operator, make_schedule):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="20", window="10", reason="r", requested_by="tests")
    for name, expected in [
        ("backfill_pause", "PAUSED"),
        ("backfill_resume", "ACTIVE"),
        ("backfill_cancel", "CANCELLED"),
    ]:
        operator_client.post(reverse(f"scheduler:{name}", args=[backfill.pk]))
        assert Backfill.objects.get(pk=backfill.pk).status == expected
    actions = list(AuditEntry.objects.filter(actor=operator.username).values_list("action", flat=True).order_by("id"))
    assert actions == ["backfill.pause", "backfill.resume", "backfill.cancel"]


def test_an_illegal_control_shows_the_service_message(operator_client, make_schedule):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="20", window="10", reason="r", requested_by="tests")
    response = operator_client.post(reverse("scheduler:backfill_resume", args=[backfill.pk]), follow=True)
    assert "cannot resume" in response.content.decode()
    assert Backfill.objects.get(pk=backfill.pk).status == BackfillStatus.ACTIVE


def test_retry_failed_puts_failed_windows_back_to_pending(operator_client, make_schedule):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="20", window="10", reason="r", requested_by="tests")
    BackfillWindow.objects.filter(backfill=backfill).update(status=WindowStatus.FAILED)
    operator_client.post(reverse("scheduler:backfill_retry", args=[backfill.pk]))
    assert set(BackfillWindow.objects.filter(backfill=backfill).values_list("status", flat=True)) == {
        WindowStatus.PENDING
    }


def test_every_bad_field_is_marked_at_once_and_named_once(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = _submit(operator_client, schedule, range_from="x", range_to="y", window_size="0")
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert errors["range_from"] == ["'x' is not a whole number"]
    assert set(errors) == {"range_from", "range_to", "window_size"}
    html = response.content.decode()
    assert "From: " in html and "range_from:" not in html and "From: from:" not in html
    assert not Backfill.objects.exists()


def test_an_inverted_range_is_reported_on_the_to_field(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = _submit(operator_client, schedule, range_from="60", range_to="0")
    assert response.status_code == 400
    assert response.context["form"].errors == {"range_to": ["must be after from (0 <= 60)"]}
    assert not Backfill.objects.exists()


def test_params_submitted_on_the_page_go_with_the_backfill(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = _submit(operator_client, schedule, params='{"table": "orders_replay"}')
    assert response.status_code == 302
    assert Backfill.objects.get().params == {"table": "orders_replay"}


def test_params_that_are_not_a_json_object_name_the_field(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = _submit(operator_client, schedule, params='["table"]')
    assert response.status_code == 400 and response.context["form"].errors["params"]
    assert not Backfill.objects.exists()


def test_the_poll_asks_for_the_summary_only_and_stops_with_286_when_finished(viewer_client, make_schedule):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="20", window="10", reason="r", requested_by="tests")
    url = reverse("scheduler:backfill_detail", args=[backfill.pk])
    page = viewer_client.get(url).content.decode()
    assert page.count('data-status="PENDING"') == 2 and "part=summary" in page
    live = viewer_client.get(url, {"part": "summary", "seen": "x"}, headers={"HX-Request": "true"})
    body = live.content.decode()
    assert live.status_code == 200 and "data-seq" not in body and "0 done" in body
    assert live["HX-Trigger"] == "backfill-changed"  # the client's numbers were stale: the grid reloads
    signature = re.search(r"seen=([0-9-]+)", body).group(1)  # what the client sends on its next poll
    same = viewer_client.get(url, {"part": "summary", "seen": signature}, headers={"HX-Request": "true"})
    assert "HX-Trigger" not in same, "nothing changed: the grid is not fetched again"

    BackfillWindow.objects.filter(backfill=backfill).update(status=WindowStatus.SUCCEEDED)
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)
    done = viewer_client.get(url, {"part": "summary", "seen": signature}, headers={"HX-Request": "true"})
    assert done.status_code == 286 and "2 done" in done.content.decode() and "hx-trigger" not in done.content.decode()
    grid = viewer_client.get(url, {"part": "grid"}, headers={"HX-Request": "true"}).content.decode()
    assert grid.count('data-status="SUCCEEDED"') == 2


def test_a_cancelled_backfill_stops_the_poll(viewer_client, make_schedule):
    from scheduler.services.admission.backfills import backfill_cancel, backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="50", window="10", reason="r", requested_by="tests")
    backfill_cancel(backfill=backfill, actor="tests", reason="wrong range")
    url = reverse("scheduler:backfill_detail", args=[backfill.pk])
    assert viewer_client.get(url, {"part": "summary"}, headers={"HX-Request": "true"}).status_code == 286


def test_a_large_backfill_is_drawn_in_blocks_with_paging_into_its_windows(viewer_client, make_schedule, settings):
    from scheduler.services.admission.backfills import backfill_submit
    from scheduler.views.backfills import GRID_CELLS, WINDOW_PAGE

    schedule = make_schedule("orders", watermark_config=WM)
    backfill = backfill_submit(schedule=schedule, start="0", end="2000", window="1", reason="r", requested_by="tests")
    BackfillWindow.objects.filter(backfill=backfill, seq=7).update(status=WindowStatus.FAILED)
    BackfillWindow.objects.filter(backfill=backfill, seq__gte=1000).update(status=WindowStatus.SUCCEEDED)
    url = reverse("scheduler:backfill_detail", args=[backfill.pk])
    page = viewer_client.get(url)
    body = page.content.decode()
    blocks = page.context["grid"]["blocks"]
    assert len(blocks) <= GRID_CELLS and page.context["grid"]["block"] == 5
    assert body.count("data-first=") == len(blocks) == 400 and "data-seq" not in body
    assert blocks[1] | {} == {**blocks[1], "first": 5, "last": 9, "status": "FAILED"}  # the failure shows in its block
    assert blocks[-1]["status"] == "SUCCEEDED" and blocks[0]["status"] == "PENDING"
    assert body.count("data-window=") == WINDOW_PAGE
    second = viewer_client.get(url, {"from": "1995"})
    assert [w.seq for w in second.context["page"]["windows"]] == list(range(1995, 2000))
    assert second.context["page"]["next"] is None and second.context["page"]["previous"] == 1995 - WINDOW_PAGE
    for hostile in ("-5", "abc", "99999999999999999999"):
        assert viewer_client.get(url, {"from": hostile}).status_code == 200


def test_the_raw_form_takes_the_order_and_reprocesses_only_failed_and_missing_windows(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    Run.objects.create(schedule=schedule, trigger_key="done", trigger_kind=TriggerKind.MANUAL,
                       workload_class=schedule.workload_class, status=RunStatus.SUCCEEDED, queued_at=timezone.now(),
                       finished_at=timezone.now(), window_low="10", window_high="20")
    response = _submit(operator_client, schedule, order="newest", reprocess="failed")
    assert response.status_code == 302, response.context["form"].errors
    backfill = Backfill.objects.get()
    assert backfill.newest_first is True and backfill.total_windows == 3
    assert sorted(BackfillWindow.objects.values_list("low", flat=True)) == ["0", "20", "30"]


def test_a_bad_order_or_reprocess_names_the_field_and_creates_nothing(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    for field in ("order", "reprocess"):
        response = _submit(operator_client, schedule, **{field: "sideways"})
        assert response.status_code == 400 and response.context["form"].errors[field]
    assert not Backfill.objects.exists()
