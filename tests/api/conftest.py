"""Fixtures for the API tests: tokens, teams, and a client that sends a bearer token."""
from __future__ import annotations

from datetime import timedelta
from itertools import count

import pytest

_keys = count(1)


@pytest.fixture
def make_token(db):
    """make_token(user, name="ci", expires_at=None) -> the plaintext token."""
    from scheduler.services.access.tokens import token_create

    def make(user, name: str = "ci", **extra) -> str:
        return token_create(user=user, name=name, actor="tests", **extra).plaintext

    return make


@pytest.fixture
def api(client):
    """api.get(path, token=...), api.post(path, body, token=...): JSON in, the response out."""

    class Api:
        def _headers(self, token):
            return {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}

        def get(self, path, token=None, **params):
            return client.get("/api/v1" + path, params, **self._headers(token))

        def post(self, path, body=None, token=None):
            return client.post("/api/v1" + path, {} if body is None else body, content_type="application/json",
                               **self._headers(token))

        def patch(self, path, body=None, token=None):
            return client.patch("/api/v1" + path, body or {}, content_type="application/json", **self._headers(token))

        def put(self, path, body=None, token=None):
            return client.put("/api/v1" + path, body or {}, content_type="application/json", **self._headers(token))

        def delete(self, path, token=None):
            return client.delete("/api/v1" + path, **self._headers(token))

    return Api()


@pytest.fixture
def team_b(db):
    from scheduler.models import Team

    return Team.objects.create(name="team-b")


@pytest.fixture
def op_token(operator, make_token):
    return make_token(operator)


@pytest.fixture
def make_run(db, now):
    from scheduler.models import Run, RunStatus, TriggerKind

    def make(schedule, status=RunStatus.SUCCEEDED, **fields):
        defaults = {
            "trigger_kind": TriggerKind.MANUAL, "trigger_key": f"api{next(_keys)}",
            "workload_class_id": schedule.workload_class_id, "queued_at": now - timedelta(minutes=5),
            "priority": schedule.priority,
        }
        if status in RunStatus.final():
            defaults.update(started_at=now - timedelta(minutes=4), finished_at=now - timedelta(minutes=3))
        return Run.objects.create(schedule=schedule, status=status, **{**defaults, **fields})

    return make


def problem_of(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/problem+json"), response["Content-Type"]
    body = response.json()
    assert body["status"] == status and body["title"] and body["type"] and "detail" in body
    return body


@pytest.fixture
def admin_user(make_user):
    return make_user("ada", "admin")


@pytest.fixture
def admin_token(admin_user, make_token):
    return make_token(admin_user)
