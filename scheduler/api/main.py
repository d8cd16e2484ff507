"""The REST API v1: one NinjaAPI, a router per resource, problem+json errors, tokens or the session.

Mounted at /api/v1/ (scheduler/urls.py); the schema is /api/v1/openapi.json and
the interactive docs /api/v1/docs (Swagger UI served from our static files).
"""
from __future__ import annotations

from ninja import NinjaAPI
from ninja.openapi.docs import Swagger


from scheduler.api import errors
from scheduler.api.auth import AUTH
from scheduler.api.parser import JsonParser
from scheduler.api.routers import audit, backfills, connections, marks, runs, schedules

PROBLEM_CODES = {"400", "401", "403", "404", "405", "409", "422", "500"}
BODY_PROBLEMS = {"413": "Payload Too Large", "415": "Unsupported Media Type"}  # what only a body can cause
# OpenAPI links: what a created object leads to (clients and schemathesis' stateful tests follow them)
LINKS = {
    ("/api/v1/schedules/{name}/runs", "post", "201"): {
        "GetRun": ("get_run", {"run_id": "$response.body#/id"}),
        "CancelRun": ("cancel_run", {"run_id": "$response.body#/id"}),
        "RunLog": ("run_log", {"run_id": "$response.body#/id"}),
    },
    ("/api/v1/runs/{run_id}/rerun", "post", "201"): {
        "GetRun": ("get_run", {"run_id": "$response.body#/id"}),
        "CancelRun": ("cancel_run", {"run_id": "$response.body#/id"}),
    },
    ("/api/v1/backfills", "post", "201"): {
        "GetBackfill": ("get_backfill", {"backfill_id": "$response.body#/id"}),
        "PauseBackfill": ("pause_backfill", {"backfill_id": "$response.body#/id"}),
        "ResumeBackfill": ("resume_backfill", {"backfill_id": "$response.body#/id"}),
        "CancelBackfill": ("cancel_backfill", {"backfill_id": "$response.body#/id"}),
    },
    ("/api/v1/schedules", "post", "201"): {
        "GetSchedule": ("get_schedule", {"name": "$response.body#/name"}),
        "TriggerRun": ("trigger_run", {"name": "$response.body#/name"}),
        "DeleteSchedule": ("delete_schedule", {"name": "$response.body#/name"}),
    },
}


class Api(NinjaAPI):
    def get_openapi_schema(self, *args, **kwargs):
        """ninja writes every response as application/json; ours errors are application/problem+json."""
        schema = super().get_openapi_schema(*args, **kwargs)
        problem_ref = {"schema": {"$ref": "#/components/schemas/Problem"}}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                if "requestBody" in operation:
                    for code, title in BODY_PROBLEMS.items():
                        operation["responses"][code] = {"description": title,
                                                        "content": {errors.CONTENT_TYPE: problem_ref}}
                for code, response in operation.get("responses", {}).items():
                    content = response.get("content") or {}
                    if str(code) in PROBLEM_CODES and "application/json" in content:
                        response["content"] = {errors.CONTENT_TYPE: content["application/json"]}
        ids = [op["operationId"] for operations in schema.get("paths", {}).values() for op in operations.values()]
        for (path, method, code), links in LINKS.items():
            responses = schema["paths"][path][method]["responses"]
            response = responses.get(code) or responses[int(code)]
            # ninja names an operation <module path>_<function name>
            response["links"] = {name: {"operationId": next(i for i in ids if i.endswith("_" + target)),
                                        "parameters": params} for name, (target, params) in links.items()}
        return schema


api = Api(
    title="ETL scheduler API",
    version="1",
    description="Schedules, runs, backfills, watermarks, breakers and the audit log. "
                "Authenticate with `Authorization: Bearer <token>` (tokens: Preferences > API tokens, or "
                "`manage.py api_token create`). Every error is application/problem+json (RFC 9457).",
    auth=AUTH,
    urls_namespace="api-v1",
    docs=Swagger(settings={"persistAuthorization": False}),
    docs_url="/docs",
    openapi_url="/openapi.json",
    parser=JsonParser(),
)
errors.register(api)
api.add_router("", schedules.router)
api.add_router("", runs.router)
api.add_router("", backfills.router)
api.add_router("", marks.router)
api.add_router("", audit.router)
api.add_router("", connections.router)
