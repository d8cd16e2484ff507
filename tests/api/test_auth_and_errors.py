"""Tokens at the door, and every error as problem+json."""
from datetime import timedelta

from django.utils import timezone

from scheduler.models import ApiToken, AuditEntry, Run
from scheduler.services.access.tokens import token_create, token_revoke
from tests.api.conftest import problem_of


def test_no_token_is_401_with_www_authenticate(api, db):
    response = api.get("/schedules")
    body = problem_of(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Bearer" in body["detail"]


def test_an_unknown_token_is_401(api, operator, op_token):
    key_id = op_token.split("_")[1]
    problem_of(api.get("/schedules", token=f"etl_{key_id}_{'x' * 43}"), 401)
    problem_of(api.get("/schedules", token="etl_nothere1_" + "y" * 43), 401)
    problem_of(api.get("/schedules", token="garbage"), 401)


def test_a_revoked_token_is_401(api, operator):
    created = token_create(user=operator, name="ci", actor="tests")
    token_revoke(token=created.token, actor="tests")
    body = problem_of(api.get("/schedules", token=created.plaintext), 401)
    assert "revoked" in body["detail"]


def test_an_expired_token_is_401(api, operator):
    created = token_create(user=operator, name="ci", actor="tests", expires_at=timezone.now() + timedelta(hours=1))
    ApiToken.objects.filter(pk=created.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    body = problem_of(api.get("/schedules", token=created.plaintext), 401)
    assert "expired" in body["detail"]


def test_only_the_hash_is_stored_and_last_use_is_recorded(api, operator):
    created = token_create(user=operator, name="ci", actor="tests")
    secret = created.plaintext.split("_", 2)[2]
    row = ApiToken.objects.get(pk=created.token.pk)
    assert secret not in row.secret_hash and len(row.secret_hash) == 64
    assert row.last_used_at is None
    assert api.get("/schedules", token=created.plaintext).status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_the_session_works_and_needs_csrf_for_unsafe_methods(client, operator, make_schedule):
    from django.test import Client

    make_schedule("orders")
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(operator)
    assert csrf_client.get("/api/v1/schedules").status_code == 200
    response = csrf_client.post("/api/v1/schedules/orders/runs", {}, content_type="application/json")
    body = problem_of(response, 403)
    assert "CSRF" in body["detail"]


def test_an_unknown_route_is_a_problem_not_html(api, db):
    body = problem_of(api.get("/nothing/here"), 404)
    assert "/api/v1/nothing/here" in body["detail"]
    problem_of(api.post("/nothing"), 404)


def test_a_wrong_method_is_405_problem(api, op_token):
    response = api.delete("/runs", token=op_token)
    body = problem_of(response, 405)
    assert response["Allow"] == "GET" and "DELETE" in body["detail"]


def test_malformed_json_is_400(client, op_token, make_schedule):
    make_schedule("orders")
    response = client.post("/api/v1/schedules/orders/runs", "{not json", content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {op_token}")
    body = problem_of(response, 400)
    assert body["errors"][0]["field"] == "body" and "line 1, column 2" in body["detail"]
    deep = client.post("/api/v1/schedules/orders/runs", "[" * 100_000 + "]" * 100_000,
                       content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {op_token}")
    assert "nested too deeply" in problem_of(deep, 400)["detail"]
    not_utf8 = client.post("/api/v1/schedules/orders/runs", b'{"reason": "\xff"}', content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {op_token}")
    assert "UTF-8" in problem_of(not_utf8, 400)["detail"]


def test_a_validation_error_is_422_with_fields(api, op_token, make_schedule):
    make_schedule("orders")
    body = problem_of(api.post("/schedules/orders/runs", {"params": "nope", "extra": 1}, token=op_token), 422)
    fields = {e["field"] for e in body["errors"]}
    assert {"params", "extra"} <= fields


def test_a_service_error_names_its_field(api, admin_token):
    body = problem_of(api.post("/schedules", {"name": "bad", "target_id": "demo.noop", "trigger_kind": "cron",
                                              "trigger_config": {"cron": "not a cron"}}, token=admin_token), 422)
    assert any(e["field"].startswith("trigger_config") for e in body["errors"])


def test_an_unexpected_error_is_a_500_problem_without_traceback(api, op_token, monkeypatch, caplog):
    from scheduler.api.routers import schedules

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(schedules.selectors, "schedules_with_last_run", boom)
    body = problem_of(api.get("/schedules", token=op_token), 500)
    assert "secret internals" not in body["detail"] and "Traceback" not in body["detail"]
    assert any("failed" in r.getMessage() for r in caplog.records)


def test_the_via_context_never_outlives_its_request(api, op_token, operator, make_schedule):
    from scheduler.services.common.audit import audit_record, audit_via

    make_schedule("orders")
    assert api.post("/schedules/orders/runs", {}, token=op_token).status_code == 201
    assert audit_via() == ""
    entry = audit_record(actor=operator, action="test.after", target=None)
    assert entry.via == ""
    assert AuditEntry.objects.filter(action="run.trigger").get().via.startswith("API token ")


def test_the_api_root_is_a_404_problem_pointing_at_the_docs(api, op_token):
    body = problem_of(api.get("/", token=op_token), 404)
    assert "/api/v1/docs" in body["detail"]


def test_a_5000_digit_integer_is_refused_naming_where_it_was(client, op_token, make_schedule):
    make_schedule("orders")
    big = "9" * 5000
    auth = {"HTTP_AUTHORIZATION": f"Bearer {op_token}"}
    body = problem_of(client.post("/api/v1/schedules/orders/runs", '{"params": {"n": %s}}' % big,
                                  content_type="application/json", **auth), 400)
    assert body["errors"] == [{"field": "body.params.n",
                               "message": "a number has 5000 digits; at most 100 are allowed"}]
    assert "sys.set_int_max_str_digits" not in body["detail"]
    for path, field in ((f"/api/v1/runs/{big}", "run_id"), (f"/api/v1/runs?limit={big}", "limit"),
                        (f"/api/v1/runs?cursor={big}", "cursor"), (f"/api/v1/audit?cursor={big}", "cursor")):
        assert problem_of(client.get(path, **auth), 422)["errors"][0]["field"] == field, path
    assert not Run.objects.exists()


def test_a_body_that_is_not_json_is_415_and_changes_nothing(client, op_token, make_schedule):
    make_schedule("orders")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {op_token}"}
    for content_type, data in (("text/plain", '{"reason": "x"}'), ("application/x-www-form-urlencoded", "reason=x"),
                               ("application/xml", "<reason>x</reason>")):
        body = problem_of(client.post("/api/v1/schedules/orders/runs", data, content_type=content_type, **auth), 415)
        assert body["errors"][0]["field"] == "Content-Type" and content_type in body["detail"]
    assert not Run.objects.exists()
    # a JSON type with a charset, or a +json type, is JSON
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = client.post("/api/v1/schedules/orders/runs", '{"reason": "x"}', content_type=content_type, **auth)
        assert response.status_code == 201, (content_type, response.content)


def test_a_wrong_content_type_without_a_token_is_still_401(client, make_schedule):
    make_schedule("orders")
    problem_of(client.post("/api/v1/schedules/orders/runs", "reason=x",
                           content_type="application/x-www-form-urlencoded"), 401)


def test_a_body_over_the_upload_limit_is_413(client, op_token, make_schedule, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    make_schedule("orders")
    body = problem_of(client.post("/api/v1/schedules/orders/runs", '{"reason": "%s"}' % ("x" * 2000),
                                  content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {op_token}"), 413)
    assert "1000" in body["detail"]
    assert not Run.objects.exists()


def test_the_schema_declares_415_on_operations_with_a_body(client, db):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    trigger = paths["/api/v1/schedules/{name}/runs"]["post"]["responses"]
    assert "application/problem+json" in trigger["415"]["content"]
    assert "415" not in paths["/api/v1/runs"]["get"]["responses"]


def test_a_token_of_an_inactive_user_is_401(api, operator, op_token):
    type(operator).objects.filter(pk=operator.pk).update(is_active=False)
    body = problem_of(api.get("/schedules", token=op_token), 401)
    assert "not active" in body["detail"]


def test_a_token_has_its_users_permissions_as_they_are_now(api, operator, op_token, make_schedule):
    from django.contrib.auth.models import Group

    make_schedule("orders")
    assert api.post("/schedules/orders/runs", {}, token=op_token).status_code == 201
    operator.groups.remove(Group.objects.get(name="operator"))
    operator.groups.add(Group.objects.get(name="viewer"))
    problem_of(api.post("/schedules/orders/runs", {}, token=op_token), 403)
    assert api.get("/schedules/orders", token=op_token).status_code == 200
    assert Run.objects.count() == 1
