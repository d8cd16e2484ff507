"""Each resource through the API: the services' own checks, visibility, and team scoping."""
import csv
import io
import json

import pytest

from scheduler.models import AuditEntry, Backfill, Run, RunStatus, Schedule
from tests.api.conftest import problem_of

WM = {"type": "datetime", "column": "updated_at", "initial": "2026-01-01T00:00:00+00:00"}


def test_schedules_list_filters_and_get(api, op_token, make_schedule):
    make_schedule("a")
    make_schedule("b", enabled=False)
    assert [s["name"] for s in api.get("/schedules", token=op_token).json()["items"]] == ["a", "b"]
    assert [s["name"] for s in api.get("/schedules", token=op_token, enabled="false").json()["items"]] == ["b"]
    assert [s["name"] for s in api.get("/schedules", token=op_token, status="enabled").json()["items"]] == ["a"]
    assert api.get("/schedules", token=op_token, breaker="open").json() == {"items": [], "next": None}
    got = api.get("/schedules/a", token=op_token).json()
    assert got["spec"]["target_id"] == "demo.noop" and got["owner"] == "default"
    problem_of(api.get("/schedules/nope", token=op_token), 404)


def test_create_update_delete_as_admin(api, admin_token):
    r = api.post("/schedules", {"name": "made", "target_id": "demo.noop", "trigger_kind": "manual",
                                "reason": "new"}, token=admin_token)
    assert r.status_code == 201, r.content
    r = api.patch("/schedules/made", {"priority": 8}, token=admin_token)
    assert r.status_code == 200 and r.json()["spec"]["priority"] == 8
    body = problem_of(api.patch("/schedules/made", {"priority": 99}, token=admin_token), 422)
    assert body["errors"][0]["field"] == "priority"
    assert Schedule.objects.get(name="made").priority == 8
    assert api.delete("/schedules/made?reason=gone", token=admin_token).status_code == 204
    assert not Schedule.objects.filter(name="made").exists()
    entry = AuditEntry.objects.filter(action="schedule.delete").get()
    assert entry.actor == "ada" and entry.via.startswith("API token ")


def test_an_operator_may_not_create_schedules(api, op_token):
    problem_of(api.post("/schedules", {"name": "x", "target_id": "demo.noop", "trigger_kind": "manual"},
                        token=op_token), 403)
    assert AuditEntry.objects.filter(action="permission.denied").exists()


def test_trigger_answers_201_with_the_run_and_it_can_be_followed_and_cancelled(api, op_token, make_schedule):
    make_schedule("orders")
    r = api.post("/schedules/orders/runs", {"params": {}, "reason": "ci"}, token=op_token)
    assert r.status_code == 201, r.content
    run = r.json()
    assert run["status"] == RunStatus.QUEUED and run["schedule"] == "orders" and run["triggered_by"] == "olivia"
    assert api.get(f"/runs/{run['id']}", token=op_token).json()["id"] == run["id"]
    r = api.post(f"/runs/{run['id']}/cancel", {"reason": "no"}, token=op_token)
    assert r.status_code == 200 and r.json()["outcome"] == "cancelled"
    assert r.json()["run"]["status"] == RunStatus.CANCELLED
    body = problem_of(api.post(f"/runs/{run['id']}/cancel", {}, token=op_token), 409)
    assert body["errors"][0]["field"] == "run"
    trig = AuditEntry.objects.get(action="run.trigger")
    key_id = op_token.split("_")[1]
    assert trig.actor == "olivia" and trig.via == f"API token {key_id}"


def test_team_a_token_cannot_act_on_team_b(api, op_token, make_schedule, team_b):
    theirs = make_schedule("theirs", owner=team_b.name)
    body = problem_of(api.post("/schedules/theirs/runs", {}, token=op_token), 403)
    assert "team-b" in body["detail"]
    refusal = AuditEntry.objects.get(action="permission.denied")
    assert refusal.actor == "olivia" and refusal.via.startswith("API token ")
    assert not Run.objects.filter(schedule=theirs).exists()
    problem_of(api.put("/schedules/theirs/watermark", {"value": "1", "reason": "x"}, token=op_token), 403)
    problem_of(api.post("/schedules/theirs/breaker/reset", {}, token=op_token), 403)


def test_lists_show_only_visible_teams(api, op_token, make_schedule, make_run, team_b, settings):
    settings.ETL_TEAMS_VIEW_ALL = False
    mine = make_schedule("mine")
    theirs = make_schedule("theirs", owner=team_b.name)
    make_run(mine)
    hidden = make_run(theirs)
    assert [s["name"] for s in api.get("/schedules", token=op_token).json()["items"]] == ["mine"]
    assert [r["schedule"] for r in api.get("/runs", token=op_token).json()["items"]] == ["mine"]
    # another team's run answers as a missing one does (issue 33): the same 404, the same words
    assert problem_of(api.get(f"/runs/{hidden.pk}", token=op_token), 404)["detail"] == f"run_id: no run {hidden.pk}"
    assert problem_of(api.get("/runs/987654", token=op_token), 404)["detail"] == "run_id: no run 987654"
    problem_of(api.get("/schedules", token=op_token, team="team-b"), 404)


def test_runs_keyset_pages_and_filters(api, op_token, make_schedule, make_run):
    s = make_schedule("orders")
    other = make_schedule("other")
    ids = [make_run(s).pk for _ in range(5)]
    make_run(other, status=RunStatus.FAILED)
    page = api.get("/runs", token=op_token, schedule="orders", limit=2).json()
    assert [r["id"] for r in page["items"]] == ids[::-1][:2]
    page2 = api.get("/runs", token=op_token, schedule="orders", limit=2, cursor=page["next"]).json()
    assert [r["id"] for r in page2["items"]] == ids[::-1][2:4]
    last = api.get("/runs", token=op_token, schedule="orders", limit=2, cursor=page2["next"]).json()
    assert [r["id"] for r in last["items"]] == ids[:1] and last["next"] is None
    assert [r["schedule"] for r in api.get("/runs", token=op_token, status="FAILED").json()["items"]] == ["other"]
    problem_of(api.get("/runs", token=op_token, limit=500), 422)


def test_rerun_and_log(api, op_token, make_schedule, make_run):
    from django.utils import timezone

    from scheduler.models import RunLogLine

    s = make_schedule("orders")
    run = make_run(s)
    for seq in (1, 2, 3):
        RunLogLine.objects.create(run=run, seq=seq, at=timezone.now(), level="INFO", source="x", message=f"l{seq}")
    r = api.post(f"/runs/{run.pk}/rerun", {"reason": "again"}, token=op_token)
    assert r.status_code == 201 and r.json()["trigger_kind"] == "rerun"
    log = api.get(f"/runs/{run.pk}/log", token=op_token, limit=2).json()
    assert [ln["message"] for ln in log["lines"]] == ["l1", "l2"] and log["next"] == 2 and not log["done"]
    rest = api.get(f"/runs/{run.pk}/log", token=op_token, after=2).json()
    assert [ln["message"] for ln in rest["lines"]] == ["l3"] and rest["done"] and rest["next"] is None


def test_backfill_preview_changes_nothing_then_create_pause_resume_cancel(api, op_token, make_schedule):
    make_schedule("orders", watermark_config=WM)
    body = {"schedule": "orders", "from": "2026-01-01T00:00:00+00:00", "to": "2026-01-04T00:00:00+00:00",
            "window": 86400, "reason": "replay", "preview": True}
    r = api.post("/backfills", body, token=op_token)
    assert r.status_code == 200, r.content
    assert r.json()["windows"] == 3 and r.json()["first"][0].startswith("2026-01-01")
    assert not Backfill.objects.exists() and not AuditEntry.objects.filter(action="backfill.submit").exists()
    r = api.post("/backfills", {**body, "preview": False}, token=op_token)
    assert r.status_code == 201, r.content
    bf = r.json()
    assert bf["total_windows"] == 3 and bf["progress"]["total"] == 3
    assert api.post(f"/backfills/{bf['id']}/pause", {}, token=op_token).json()["status"] == "PAUSED"
    assert api.post(f"/backfills/{bf['id']}/resume", {}, token=op_token).json()["status"] == "ACTIVE"
    assert api.post(f"/backfills/{bf['id']}/cancel", {"reason": "x"}, token=op_token).json()["status"] == "CANCELLED"
    assert api.get(f"/backfills/{bf['id']}", token=op_token).json()["status"] == "CANCELLED"
    bad = problem_of(api.post("/backfills", {**body, "to": "2025-01-01T00:00:00+00:00"}, token=op_token), 422)
    assert bad["errors"][0]["field"] == "to"


def test_watermark_get_and_set_needs_a_reason(api, op_token, make_schedule):
    make_schedule("orders", watermark_config=WM)
    assert api.get("/schedules/orders/watermark", token=op_token).json()["value"] is None
    problem_of(api.put("/schedules/orders/watermark", {"value": "2026-01-02T00:00:00+00:00"}, token=op_token), 422)
    problem_of(api.put("/schedules/orders/watermark", {"value": "2026-01-02T00:00:00+00:00", "reason": ""},
                       token=op_token), 422)
    r = api.put("/schedules/orders/watermark", {"value": "2026-01-02T00:00:00+00:00", "reason": "fix"}, token=op_token)
    assert r.status_code == 200 and r.json()["value"].startswith("2026-01-02")


def test_breaker_reset(api, op_token, make_schedule):
    s = make_schedule("orders")
    Schedule.objects.filter(pk=s.pk).update(breaker_status="open", breaker_failures=3)
    r = api.post("/schedules/orders/breaker/reset", {"reason": "fixed"}, token=op_token)
    assert r.status_code == 200 and r.json()["status"] == "closed"


def test_audit_filter_and_exports(api, op_token, make_schedule):
    make_schedule("orders")
    api.post("/schedules/orders/runs", {}, token=op_token)
    page = api.get("/audit", token=op_token, action="run.").json()
    assert [e["action"] for e in page["items"]] == ["run.trigger"]
    assert page["items"][0]["via"].startswith("API token ")
    csv_response = api.get("/audit/export", token=op_token, action="run.", format="csv")
    assert csv_response["Content-Type"].startswith("text/csv")
    text = b"".join(csv_response.streaming_content).decode()
    assert text.splitlines()[0].endswith(",via") and "API token" in text
    row = next(csv.DictReader(io.StringIO(text)))
    assert json.loads(row["after"])["run"] > 0  # before/after are JSON, as on the page's export
    jsonl = api.get("/audit/export", token=op_token, format="jsonl", limit=1)
    lines = b"".join(jsonl.streaming_content).decode().splitlines()
    assert len(lines) == 1 and '"action"' in lines[0]


def test_the_audit_page_shows_via(client, op_token, api, make_schedule, operator):
    make_schedule("orders")
    api.post("/schedules/orders/runs", {}, token=op_token)
    client.force_login(operator)
    assert "via API token" in client.get("/audit/").content.decode()


def test_the_audit_csv_page_has_via_and_a_session_call_has_none(client, op_token, api, make_schedule, operator):
    import csv
    import io

    make_schedule("orders")
    api.post("/schedules/orders/runs", {}, token=op_token)
    client.force_login(operator)
    assert client.post("/api/v1/schedules/orders/runs", {}, content_type="application/json").status_code == 201
    text = b"".join(client.get("/audit/export.csv?action=run.trigger").streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted(r["via"] for r in rows) == ["", f"API token {op_token.split('_')[1]}"]


def test_alert_channels_are_set_through_the_api_and_shown_masked(api, admin_token, settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True
    secret_url = "json://hooks.example.com/alerts?token=s3cr3t-v4lue"
    r = api.post("/schedules", {"name": "paged", "target_id": "demo.noop", "trigger_kind": "manual",
                                "alert_channels": [secret_url], "reason": "new"}, token=admin_token)
    assert r.status_code == 201, r.content
    shown = r.json()["spec"]["alert_channels"]
    assert len(shown) == 1 and "s3cr3t-v4lue" not in shown[0]
    assert "s3cr3t-v4lue" in Schedule.objects.get(name="paged").alert_channels, "stored whole"
    # the masked URL sent back keeps the stored secret
    assert api.patch("/schedules/paged", {"alert_channels": shown, "priority": 7},
                     token=admin_token).status_code == 200
    assert "s3cr3t-v4lue" in Schedule.objects.get(name="paged").alert_channels
    body = problem_of(api.patch("/schedules/paged", {"alert_channels": ["nosuchscheme://x"]}, token=admin_token), 422)
    assert body["errors"][0]["field"] == "alert_channels"


def test_a_dbt_target_is_checked_as_at_every_other_door(api, admin_token):
    body = problem_of(api.post("/schedules", {"name": "marts", "target_kind": "dbt", "trigger_kind": "manual",
                                              "dbt": {"project_dir": "relative/dir"}}, token=admin_token), 422)
    assert body["errors"][0]["field"].startswith("dbt.")
    assert not Schedule.objects.filter(name="marts").exists()


def test_schedules_filter_by_team_and_status_together(api, admin_token, make_schedule, team_b):
    make_schedule("a_on")
    make_schedule("a_off", enabled=False)
    make_schedule("b_on", owner=team_b.name)
    make_schedule("b_off", owner=team_b.name, enabled=False)

    def names(**filters):
        return [s["name"] for s in api.get("/schedules", token=admin_token, **filters).json()["items"]]

    assert names(team="team-b") == ["b_off", "b_on"]
    assert names(team="team-b", status="disabled") == ["b_off"]
    assert names(team="default", status="enabled") == ["a_on"]
    assert names(status="disabled") == ["a_off", "b_off"]
    body = problem_of(api.get("/schedules", token=admin_token, status="paused"), 422)
    assert body["errors"][0]["field"] == "status"


def test_an_unknown_owner_is_refused_under_owner_and_nothing_is_made(api, admin_token):
    body = problem_of(api.post("/schedules", {"name": "made", "target_id": "demo.noop", "trigger_kind": "manual",
                                              "owner": "nosuchteam"}, token=admin_token), 422)
    assert body["errors"][0]["field"] == "owner" and "nosuchteam" in body["detail"]
    assert not Schedule.objects.filter(name="made").exists()


# each refused by the admin's schedule form; the API must refuse it too, under the same field
ADMIN_REFUSES = [
    ("trigger_config", {"trigger_config": {"cron": "61 * * * *"}}),
    ("timezone", {"timezone": "Mars/Base"}),
    ("priority", {"priority": 10}),
    ("timeout_seconds", {"timeout_seconds": 0}),
    ("retry_max_attempts", {"retry_max_attempts": 0}),
    ("workload_class", {"workload_class": "nope"}),
    ("target_id", {"target_id": "no.such"}),
    ("trigger_config", {"trigger_kind": "event", "trigger_config": {"topic": "t", "filter": "status =="}}),
    ("watermark_config", {"watermark_config": {"type": "sometimes"}}),
    ("depends_on", {"depends_on": ["base"]}),
]


@pytest.mark.parametrize("field, change", ADMIN_REFUSES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(ADMIN_REFUSES)])
def test_the_api_refuses_what_the_admin_form_refuses(api, admin_token, make_schedule, field, change):
    import json

    from django.forms.models import model_to_dict

    from scheduler.admin.schedules import ScheduleForm
    from scheduler.models import WorkloadClass

    base = make_schedule("base", trigger_kind="cron", trigger_config={"cron": "0 * * * *"})
    data = {k: v for k, v in model_to_dict(base).items() if v is not None}
    for key, value in data.items():
        if isinstance(value, (dict, list)) and key != "depends_on":
            data[key] = json.dumps(value)
    data["depends_on"] = [s.pk for s in base.depends_on.all()]
    assert ScheduleForm(data=data, instance=base).is_valid(), "the unchanged schedule is valid"
    bad = {**data}
    for key, value in change.items():
        if key == "workload_class":
            value = WorkloadClass.objects.filter(name=value).values_list("pk", flat=True).first() or 999999
        elif key == "depends_on":
            value = [base.pk]
        bad[key] = json.dumps(value) if isinstance(value, dict) else value
    form = ScheduleForm(data=bad, instance=Schedule.objects.get(pk=base.pk))
    assert not form.is_valid() and field in form.errors, form.errors

    before = Schedule.objects.filter(pk=base.pk).values().get()
    body = problem_of(api.patch("/schedules/base", change, token=admin_token), 422)
    assert body["errors"][0]["field"].split(".")[0] == field
    assert Schedule.objects.filter(pk=base.pk).values().get() == before, "nothing changed"


def test_audit_filters_by_actor_target_team_and_time_and_pages_by_keyset(api, op_token, admin_token, make_schedule,
                                                                        team_b):
    from datetime import timedelta

    from django.utils import timezone

    orders = make_schedule("orders")
    make_schedule("theirs", owner=team_b.name)
    api.post("/schedules/orders/runs", {}, token=op_token)
    api.post("/schedules/theirs/runs", {}, token=admin_token)
    api.post("/schedules/orders/runs", {}, token=admin_token)

    def actions(**filters):
        page = api.get("/audit", token=op_token, action="run.trigger", **filters)
        assert page.status_code == 200, page.content
        return [(e["actor"], e["target_repr"]) for e in page.json()["items"]]

    assert actions(actor="olivia") == [("olivia", "orders")]
    assert actions(target=f"schedule:{orders.pk}") == [("ada", "orders"), ("olivia", "orders")]
    assert actions(target="theirs") == [("ada", "theirs")]
    assert actions(team="team-b") == [("ada", "theirs")]
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert actions(since=later) == [] and len(actions(until=later)) == 3
    first = api.get("/audit", token=op_token, action="run.trigger", limit=2).json()
    rest = api.get("/audit", token=op_token, action="run.trigger", limit=2, cursor=first["next"]).json()
    assert len(first["items"]) == 2 and len(rest["items"]) == 1 and rest["next"] is None
    assert first["items"][-1]["id"] > rest["items"][0]["id"]
    problem_of(api.get("/audit", token=op_token, team="nope"), 404)


def test_runs_filter_by_team_and_queue_time(api, admin_token, make_schedule, make_run, team_b, now):
    from datetime import timedelta

    mine = make_run(make_schedule("mine"), queued_at=now - timedelta(hours=2))
    theirs = make_run(make_schedule("theirs", owner=team_b.name), queued_at=now - timedelta(minutes=10))

    def ids(**filters):
        response = api.get("/runs", token=admin_token, **filters)
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["items"]]

    assert ids(team="team-b") == [theirs.pk]
    assert ids(team="default") == [mine.pk]
    assert ids(since=(now - timedelta(hours=1)).isoformat()) == [theirs.pk]
    assert ids(until=(now - timedelta(hours=1)).isoformat()) == [mine.pk]
    naive = (now - timedelta(hours=1)).replace(tzinfo=None).isoformat()  # read as UTC
    assert ids(since=naive) == [theirs.pk]
    assert ids(team="team-b", status="FAILED") == []
