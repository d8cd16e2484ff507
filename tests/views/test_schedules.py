from __future__ import annotations

import html

from django.urls import reverse

from scheduler.models import AuditEntry, BreakerStatus, Run, RunStatus, Schedule, WatermarkState

WM = {"type": "integer", "column": "id", "initial": 0}


def test_the_list_describes_triggers_in_plain_words_with_next_fires_local_and_utc(viewer_client, make_schedule):
    make_schedule("hourly", trigger_kind="cron", trigger_config={"cron": "0 * * * *"}, timezone="Europe/Berlin")
    response = viewer_client.get(reverse("scheduler:schedules"))
    page = html.unescape(response.content.decode())
    row = response.context["rows"][0]
    assert "0 * * * *" in row["trigger_text"] and "Europe/Berlin" in row["trigger_text"]
    assert len(row["fires"]) == 2
    first = row["fires"][0]
    assert first["local"] == first["utc"] and str(first["local"].tzinfo) == "Europe/Berlin"
    assert " UTC" in page and ("CET" in page or "CEST" in page)


def test_the_list_shows_the_last_run_and_breaker_without_a_query_per_schedule(
    viewer_client, make_schedule, make_run, django_assert_max_num_queries
):
    schedules = [make_schedule(f"s{i}") for i in range(8)]
    last = {s.pk: make_run(s, RunStatus.FAILED) for s in schedules}
    # the 9th: the viewer's groups, named in the "view only" line; the 10th: where each strip begins (issue 25);
    # the 11th and 12th: since when the failing ones fail, for all of them (issue 37, streaks.py)
    with django_assert_max_num_queries(12):
        response = viewer_client.get(reverse("scheduler:schedules"))
    rows = {r["schedule"].pk: r["schedule"] for r in response.context["rows"]}
    assert all(rows[pk].last_run_id == run.pk and rows[pk].last_run_status == "FAILED" for pk, run in last.items())


def test_an_operator_disables_and_enables_a_schedule_with_an_audit_entry(operator_client, operator, make_schedule):
    schedule = make_schedule("orders")
    operator_client.post(reverse("scheduler:schedule_toggle", args=[schedule.pk]), {"enabled": "0"})
    assert Schedule.objects.get(pk=schedule.pk).enabled is False
    operator_client.post(reverse("scheduler:schedule_toggle", args=[schedule.pk]), {"enabled": "1"})
    assert Schedule.objects.get(pk=schedule.pk).enabled is True
    assert AuditEntry.objects.filter(action="schedule.update", actor=operator.username).count() == 2


def test_run_now_queues_a_run_with_override_params_and_records_the_person(operator_client, operator, make_schedule):
    schedule = make_schedule("orders", params={"day": "x", "keep": 1})
    response = operator_client.post(
        reverse("scheduler:schedule_run_now", args=[schedule.pk]),
        {"params": '{"day": "2026-03-01"}', "reason": "rerun"},
    )
    run = Run.objects.get(schedule=schedule)
    assert response.status_code == 302 and response["Location"] == reverse("scheduler:run_detail", args=[run.pk])
    assert run.params == {"day": "2026-03-01", "keep": 1} and run.triggered_by == operator.username
    assert AuditEntry.objects.filter(action="run.trigger", actor=operator.username).exists()


def test_run_now_with_bad_json_names_the_field_and_queues_nothing(operator_client, make_schedule):
    schedule = make_schedule("orders")
    response = operator_client.post(reverse("scheduler:schedule_run_now", args=[schedule.pk]), {"params": '{"day": '})
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="params-error"' in page and "params: is not valid JSON" in page
    assert not Run.objects.exists()


def test_run_now_with_a_json_list_is_refused(operator_client, make_schedule):
    schedule = make_schedule("orders")
    response = operator_client.post(reverse("scheduler:schedule_run_now", args=[schedule.pk]), {"params": "[1, 2]"})
    assert response.status_code == 400 and "must be a JSON object" in response.content.decode()
    assert not Run.objects.exists()


def test_run_now_on_a_disabled_schedule_shows_the_service_message(operator_client, make_schedule):
    schedule = make_schedule("orders", enabled=False)
    response = operator_client.post(reverse("scheduler:schedule_run_now", args=[schedule.pk]), {"params": ""})
    assert response.status_code == 400 and "is disabled" in response.content.decode()
    assert not Run.objects.exists()


def test_detail_draws_the_history_chart_and_lists_dependencies(viewer_client, make_schedule, make_run):
    up = make_schedule("extract")
    schedule = make_schedule("load", depends_on=[up], trigger_kind="upstream")
    down = make_schedule("report", depends_on=[schedule], trigger_kind="upstream")
    runs = [make_run(schedule, RunStatus.SUCCEEDED, rows_loaded=n) for n in (10, 30)]
    response = viewer_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk]))
    page = response.content.decode()
    assert [b.title.split(":")[0] for b in response.context["chart"].bars] == [f"run {r.pk}" for r in runs]
    assert response.context["chart"].max_rows == 30 and 'class="rows-line"' in page
    assert response.context["upstream"] == [up] and response.context["downstream"] == [down]


def test_setting_a_watermark_asks_for_a_reason(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    url = reverse("scheduler:schedule_watermark", args=[schedule.pk])
    response = operator_client.post(url, {"value": "500", "op": "set", "reason": ""})
    assert response.status_code == 400 and "reason: This field is required." in response.content.decode()
    assert not WatermarkState.objects.filter(schedule=schedule, value="500").exists()


def test_an_operator_sets_and_resets_the_watermark_with_audit_entries(operator_client, operator, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    url = reverse("scheduler:schedule_watermark", args=[schedule.pk])
    operator_client.post(url, {"value": "500", "op": "set", "reason": "skip bad rows", "confirm": "1"})
    assert WatermarkState.objects.get(schedule=schedule).value == "500"
    operator_client.post(url, {"value": "500", "op": "reset", "reason": "reload all", "confirm": "1"})
    assert WatermarkState.objects.get(schedule=schedule).value == ""
    actions = list(AuditEntry.objects.filter(actor=operator.username).order_by("id").values_list("action", "reason"))
    assert actions == [("watermark.set", "skip bad rows"), ("watermark.reset", "reload all")]


def test_a_watermark_value_of_the_wrong_type_names_the_field(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = operator_client.post(
        reverse("scheduler:schedule_watermark", args=[schedule.pk]), {"value": "yesterday", "op": "set", "reason": "x"}
    )
    assert response.status_code == 400 and "value: " in html.unescape(response.content.decode())
    assert "is not a whole number" in html.unescape(response.content.decode())


def test_an_operator_resets_an_open_breaker(operator_client, operator, make_schedule):
    schedule = make_schedule("orders")
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=5)
    response = operator_client.post(reverse("scheduler:breaker_reset", args=[schedule.pk]), {"reason": "fixed source"})
    assert response.status_code == 302
    schedule.refresh_from_db()
    assert schedule.breaker_status == BreakerStatus.CLOSED and schedule.breaker_failures == 0
    assert AuditEntry.objects.filter(action="breaker.reset", actor=operator.username, reason="fixed source").exists()


def test_the_graph_places_upstreams_left_and_links_each_node(viewer_client, make_schedule, make_run):
    a = make_schedule("a")
    b = make_schedule("b", depends_on=[a], trigger_kind="upstream")
    c = make_schedule("c", depends_on=[b, a], trigger_kind="upstream")
    make_run(b, RunStatus.FAILED)
    response = viewer_client.get(reverse("scheduler:graph"))
    layers = {n.label: n.layer for n in response.context["layout"].nodes}
    assert layers == {"a": 0, "b": 1, "c": 2}
    assert len(response.context["layout"].edges) == 3
    page = response.content.decode()
    assert f'href="{reverse("scheduler:schedule_detail", args=[c.pk])}"' in page
    assert 'class="node n-failed" data-schedule="b"' in page and 'class="node n-none" data-schedule="a"' in page


def test_the_breaker_count_reads_right_past_its_threshold(viewer_client, make_schedule):
    schedule = make_schedule("orders", breaker_threshold=3)
    url = reverse("scheduler:schedule_detail", args=[schedule.pk])
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.OPEN, breaker_failures=4)
    page = viewer_client.get(url).content.decode()
    assert "4 consecutive failures (threshold 3)" in page and "of 3" not in page
    Schedule.objects.filter(pk=schedule.pk).update(breaker_status=BreakerStatus.CLOSED, breaker_failures=1)
    assert "1 consecutive failure; it opens at 3" in viewer_client.get(url).content.decode()


def test_a_watermark_error_names_its_field_once(operator_client, make_schedule):
    schedule = make_schedule("orders", watermark_config=WM)
    response = operator_client.post(
        reverse("scheduler:schedule_watermark", args=[schedule.pk]), {"value": "yesterday", "op": "set", "reason": "x"}
    )
    assert "value: value:" not in html.unescape(response.content.decode())


def test_run_now_params_error_names_its_field_once(operator_client, make_schedule):
    schedule = make_schedule("orders")
    response = operator_client.post(reverse("scheduler:schedule_run_now", args=[schedule.pk]), {"params": '{"a": NaN}'})
    assert "params: params:" not in html.unescape(response.content.decode())


def test_a_future_watermark_is_refused_on_the_page_unless_forced(operator_client, make_schedule):
    schedule = make_schedule("dated", watermark_config={"type": "datetime", "column": "ts",
                                                        "initial": "2020-01-01T00:00:00+00:00"})
    url = reverse("scheduler:schedule_watermark", args=[schedule.pk])
    response = operator_client.post(url, {"value": "2999-01-01T00:00:00+00:00", "op": "set", "reason": "x"})
    assert response.status_code == 400 and "is in the future" in response.context["watermark_form"].errors["value"][0]
    assert not WatermarkState.objects.filter(schedule=schedule).exclude(value="").exists()
    response = operator_client.post(url, {"value": "2999-01-01T00:00:00+00:00", "op": "set", "reason": "x",
                                          "force": "on", "confirm": "1"})
    assert response.status_code == 302
    assert WatermarkState.objects.get(schedule=schedule).value == "2999-01-01T00:00:00+00:00"
