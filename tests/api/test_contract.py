"""The API's contract: 409 for a name taken or a state that refuses the action, 404 for a schedule deleted under a
PATCH, and JSON types only (ISO 8601 timestamps, JSON booleans) at every field, with nothing changed."""
from __future__ import annotations

import pytest

from scheduler.models import AuditEntry, Backfill, BackfillStatus, Run, RunStatus, Schedule
from tests.api.conftest import problem_of

WM = {"type": "datetime", "column": "updated_at", "initial": "2026-01-01T00:00:00+00:00"}


def _changes() -> int:
    """What the API wrote: audit entries (every change writes one) and runs."""
    return AuditEntry.objects.exclude(action="permission.denied").count() + Run.objects.count()


# --- names and races --------------------------------------------------------------

def test_a_rename_to_a_taken_name_is_a_409_naming_the_field_and_changes_nothing(api, admin_token, make_schedule):
    make_schedule("orders", priority=3)
    make_schedule("invoices")
    before = _changes()
    body = problem_of(api.patch("/schedules/orders", {"name": "invoices", "priority": 7}, token=admin_token), 409)
    assert body["type"].endswith("#conflict")
    assert body["errors"] == [{"field": "name", "message": "a schedule named 'invoices' already exists"}]
    assert sorted(Schedule.objects.values_list("name", "priority")) == [("invoices", 5), ("orders", 3)]
    assert _changes() == before
    # a create of a taken name is the same conflict
    body = problem_of(api.post("/schedules", {"name": "orders", "target_id": "demo.noop", "trigger_kind": "manual"},
                               token=admin_token), 409)
    assert body["errors"][0]["field"] == "name" and Schedule.objects.count() == 2
    # renaming to its own name, or to a free one, is no conflict
    assert api.patch("/schedules/orders", {"name": "orders"}, token=admin_token).status_code == 200
    assert api.patch("/schedules/orders", {"name": "orders2"}, token=admin_token).json()["name"] == "orders2"


def test_a_rename_that_loses_the_race_for_a_name_is_a_409(api, admin_token, make_schedule, monkeypatch):
    """The name was free when checked; another request takes it before the UPDATE (its unique index decides)."""
    from scheduler.services.definitions import schedules

    make_schedule("orders")
    original = schedules.validate_schedule

    def validate_then_lose_the_race(candidate, **kwargs):
        original(candidate, **kwargs)
        Schedule.objects.create(name="invoices", target_id="demo.noop", trigger_kind="manual",  # someone else's
                                workload_class=candidate.workload_class, owner=candidate.owner)

    monkeypatch.setattr(schedules, "validate_schedule", validate_then_lose_the_race)
    body = problem_of(api.patch("/schedules/orders", {"name": "invoices"}, token=admin_token), 409)
    assert body["errors"][0]["field"] == "name"
    assert Schedule.objects.get(name="orders")


def test_a_patch_racing_a_delete_before_the_lock_answers_404(api, admin_token, make_schedule, monkeypatch):
    """Deleted after the API read the schedule and before the service locks its row."""
    from scheduler.api.routers import schedules as router

    make_schedule("orders")
    original = router.require

    def require_then_someone_deletes(request, perm, obj=None):
        original(request, perm, obj)
        if perm == "scheduler.change_schedule":
            Schedule.objects.filter(name="orders").delete()

    monkeypatch.setattr(router, "require", require_then_someone_deletes)
    before = AuditEntry.objects.count()
    body = problem_of(api.patch("/schedules/orders", {"priority": 7}, token=admin_token), 404)
    assert body["errors"] == [{"field": "name", "message": "schedule 'orders' was deleted"}]
    assert not Schedule.objects.exists() and AuditEntry.objects.count() == before


def test_a_patch_racing_a_delete_after_the_read_answers_404_and_never_recreates_it(api, admin_token, make_schedule,
                                                                                  monkeypatch):
    """Deleted between the service's read and its save (SQLite has no row lock): the save must not INSERT it again
    (Django's save() would, when its UPDATE finds no row)."""
    from scheduler.services.definitions import schedules

    schedule = make_schedule("orders")
    original = schedules.validate_schedule
    seen = []

    def validate_then_someone_deletes(candidate, **kwargs):
        original(candidate, **kwargs)
        Schedule.objects.filter(pk=schedule.pk).delete()
        seen.append(Schedule.objects.filter(pk=schedule.pk).exists())

    monkeypatch.setattr(schedules, "validate_schedule", validate_then_someone_deletes)
    body = problem_of(api.patch("/schedules/orders", {"name": "orders2", "priority": 7}, token=admin_token), 404)
    assert body["errors"] == [{"field": "name", "message": "schedule 'orders' was deleted"}] and seen == [False]
    # the request's transaction is rolled back with its simulated delete: the row is as it was, never re-created
    assert list(Schedule.objects.values_list("pk", "priority")) == [(schedule.pk, 5)]
    assert not AuditEntry.objects.filter(action="schedule.update").exists()


# --- JSON types only ----------------------------------------------------------------

@pytest.mark.parametrize("path", ["/runs", "/audit", "/audit/export"])
@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", ["0.5", "1700000000", "yesterday", "2026-13-01T00:00:00Z"])
def test_a_timestamp_in_a_query_is_iso_8601_only(api, admin_token, path, field, value):
    body = problem_of(api.get(path, token=admin_token, **{field: value}), 422)
    assert [e["field"] for e in body["errors"]] == [field]
    assert "ISO 8601" in body["errors"][0]["message"]


def test_iso_8601_timestamps_are_read_with_or_without_an_offset(api, admin_token, make_schedule, make_run, now):
    from datetime import timedelta

    run = make_run(make_schedule("orders"), queued_at=now)
    for since in ["2026-03-02T11:59:00Z", "2026-03-02T13:59:00+02:00", "2026-03-02T11:59:00", "2026-03-02"]:
        page = api.get("/runs", token=admin_token, since=since)
        assert page.status_code == 200 and [r["id"] for r in page.json()["items"]] == [run.pk], since
    late = (now + timedelta(minutes=1)).isoformat()
    assert api.get("/runs", token=admin_token, since=late).json()["items"] == []


@pytest.mark.parametrize("value", ["yes", "1", "0", "on", "True", ""])
def test_a_boolean_in_a_query_is_true_or_false_only(api, admin_token, make_schedule, value):
    make_schedule("orders")
    body = problem_of(api.get("/schedules", token=admin_token, enabled=value), 422)
    assert [e["field"] for e in body["errors"]] == ["enabled"]
    assert [s["name"] for s in api.get("/schedules", token=admin_token, enabled="true").json()["items"]] == ["orders"]
    assert api.get("/schedules", token=admin_token, enabled="false").json()["items"] == []


@pytest.mark.parametrize("body", [{"from_failure": 0}, {"downstream": "yes"}, {"downstream": 1},
                                  {"from_failure": "true"}, {"downstream": None}])
def test_a_rerun_takes_json_booleans_only(api, op_token, make_schedule, make_run, body):
    run = make_run(make_schedule("orders"))
    before = _changes()
    problem = problem_of(api.post(f"/runs/{run.pk}/rerun", body, token=op_token), 422)
    assert [e["field"] for e in problem["errors"]] == list(body)
    assert _changes() == before
    assert api.post(f"/runs/{run.pk}/rerun", {"downstream": False, "from_failure": False},
                    token=op_token).status_code == 201


def _schema_type(schema: dict, components: dict) -> set[str]:
    """The JSON types and formats a property or parameter allows ({"boolean"}, {"string:date-time", "null"})."""
    if "$ref" in schema:
        return _schema_type(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    if "anyOf" in schema:
        return set().union(*(_schema_type(s, components) for s in schema["anyOf"]))
    kind = schema.get("type", "")
    return {f"{kind}:{schema['format']}" if "format" in schema else kind}


def test_every_boolean_and_timestamp_of_the_api_refuses_other_json_types(api, admin_token, make_schedule, make_run):
    """Walk the served schema: each boolean in a body or a query, and each date-time in a query, answers 422 naming
    it for a value of another type, and nothing changes. New fields are covered as they are added."""
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    ids = {"name": "orders", "run_id": make_run(schedule).pk,
           "backfill_id": backfill_submit(schedule=schedule, start="2026-01-01T00:00:00+00:00",
                                          end="2026-01-02T00:00:00+00:00", window=86400, reason="seed",
                                          requested_by="tests").pk}
    spec = api.get("/openapi.json").json()
    components = spec["components"]["schemas"]
    checked: set[tuple[str, str, str]] = set()
    before = _changes()
    for path, operations in spec["paths"].items():
        url = path.removeprefix("/api/v1").format(**ids)
        for method, operation in operations.items():
            for param in operation.get("parameters", []):
                types = _schema_type(param["schema"], components)
                wrong = ["yes", "1"] if "boolean" in types else ["0.5"] if "string:date-time" in types else []
                for value in wrong if param["in"] == "query" else []:
                    if method == "get":
                        response = api.get(url, token=admin_token, **{param["name"]: value})
                    else:  # a flag of a change (DELETE ?stop_runs=): refused before anything changes
                        response = getattr(api, method)(f"{url}?{param['name']}={value}", token=admin_token)
                    problem = problem_of(response, 422)
                    assert param["name"] in [e["field"] for e in problem["errors"]], (path, param["name"], value)
                    checked.add((method, path, param["name"]))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            properties = components[body["$ref"].rsplit("/", 1)[-1]]["properties"] if body else {}
            for name, prop in properties.items():
                if "boolean" not in _schema_type(prop, components):
                    continue
                for value in (0, 1, "yes", "true"):
                    send = getattr(api, method)
                    problem = problem_of(send(url, {name: value}, token=admin_token), 422)
                    assert name in [e["field"] for e in problem["errors"]], (path, method, name, value)
                    checked.add((method, path, name))
    assert _changes() == before
    assert {
        ("get", "/api/v1/runs", "since"), ("get", "/api/v1/runs", "until"), ("get", "/api/v1/audit", "until"),
        ("get", "/api/v1/audit/export", "since"), ("get", "/api/v1/schedules", "enabled"),
        ("delete", "/api/v1/schedules/{name}", "stop_runs"),
        ("post", "/api/v1/runs/{run_id}/rerun", "from_failure"), ("post", "/api/v1/runs/{run_id}/rerun", "downstream"),
        ("post", "/api/v1/runs/{run_id}/cancel", "force"), ("put", "/api/v1/schedules/{name}/watermark", "force"),
        ("post", "/api/v1/backfills", "preview"), ("post", "/api/v1/backfills", "newest_first"),
        ("post", "/api/v1/schedules", "enabled"), ("patch", "/api/v1/schedules/{name}", "enabled"),
    } <= checked, sorted(checked)


def test_a_number_in_a_body_is_not_text(api, admin_token, make_schedule):
    make_schedule("orders")
    body = problem_of(api.patch("/schedules/orders", {"priority": "7"}, token=admin_token), 422)
    assert [e["field"] for e in body["errors"]] == ["priority"]
    assert Schedule.objects.get(name="orders").priority == 5


# --- state conflicts ------------------------------------------------------------------

def test_state_conflicts_answer_409_naming_the_object_and_change_nothing(api, op_token, make_schedule, make_run):
    from scheduler.services.admission.backfills import backfill_submit

    schedule = make_schedule("orders", watermark_config=WM)
    done = make_run(schedule, status=RunStatus.SUCCEEDED)
    running = make_run(schedule, status=RunStatus.RUNNING)
    backfill = backfill_submit(schedule=schedule, start="2026-01-01T00:00:00+00:00", end="2026-01-02T00:00:00+00:00",
                               window=86400, reason="seed", requested_by="tests")
    Backfill.objects.filter(pk=backfill.pk).update(status=BackfillStatus.COMPLETED)
    before = _changes()
    conflicts = [
        (f"/runs/{done.pk}/cancel", {}, "run", "is already SUCCEEDED"),
        (f"/runs/{running.pk}/rerun", {}, "run", "is still RUNNING"),
        (f"/backfills/{backfill.pk}/pause", {}, "backfill", "is COMPLETED"),
        (f"/backfills/{backfill.pk}/resume", {}, "backfill", "is COMPLETED"),
        (f"/backfills/{backfill.pk}/cancel", {}, "backfill", "is COMPLETED"),
    ]
    for path, body, field, words in conflicts:
        problem = problem_of(api.post(path, body, token=op_token), 409)
        assert problem["type"].endswith("#conflict") and problem["title"] == "Conflict", path
        assert [e["field"] for e in problem["errors"]] == [field] and words in problem["detail"], (path, problem)
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    problem = problem_of(api.post("/schedules/orders/runs", {}, token=op_token), 409)
    assert problem["errors"][0]["field"] == "schedule" and "disabled" in problem["detail"]
    assert _changes() == before
    assert Backfill.objects.get(pk=backfill.pk).status == BackfillStatus.COMPLETED


def test_a_rerun_from_failure_of_a_run_that_did_not_fail_is_a_409(api, op_token, make_schedule, make_run):
    from scheduler.pipelines.registry import all_workflows

    workflow = make_schedule("wf", target_kind="workflow", target_id=min(w.id for w in all_workflows()))
    run = make_run(workflow, status=RunStatus.SUCCEEDED)
    problem = problem_of(api.post(f"/runs/{run.pk}/rerun", {"from_failure": True}, token=op_token), 409)
    assert problem["errors"][0]["field"] == "run" and "only a FAILED or CANCELLED" in problem["detail"]
    # what the run is (not a workflow), rather than its state, stays bad input
    plain = make_run(make_schedule("orders"), status=RunStatus.FAILED)
    problem_of(api.post(f"/runs/{plain.pk}/rerun", {"from_failure": True}, token=op_token), 422)


def test_the_schema_declares_409_where_it_can_happen(api):
    paths = api.get("/openapi.json").json()["paths"]
    for path, method in [("/api/v1/schedules/{name}", "patch"), ("/api/v1/schedules", "post"),
                         ("/api/v1/runs/{run_id}/cancel", "post"), ("/api/v1/runs/{run_id}/rerun", "post"),
                         ("/api/v1/schedules/{name}/runs", "post"), ("/api/v1/backfills/{backfill_id}/pause", "post")]:
        assert "application/problem+json" in paths[path][method]["responses"]["409"]["content"], (path, method)
    assert "409" not in paths["/api/v1/runs/{run_id}"]["get"]["responses"]
