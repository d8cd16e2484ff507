"""Shared fixtures: time is injected (`now`), data is made by small factories."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest


@pytest.fixture
def now() -> datetime:
    return datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def standard_class(db):
    from scheduler.models import WorkloadClass

    wc, _ = WorkloadClass.objects.get_or_create(name="standard", defaults={"concurrency_limit": 4})
    return wc


@pytest.fixture
def make_schedule(db, standard_class):
    """make_schedule(name, **fields) -> Schedule, saved through the service like every entry point."""
    from scheduler.services.schedules import schedule_save

    def make(name: str = "s1", **fields):
        data = {"name": name, "target_id": fields.pop("target_id", "demo.noop"), "trigger_kind": "manual", **fields}
        return schedule_save(data=data, actor="tests")

    return make


@pytest.fixture
def make_user(db):
    from django.contrib.auth.models import Group, User

    def make(username: str, group: str | None = None, **extra):
        user = User.objects.create_user(username=username, password="pw-" + username + "-x9!", **extra)
        if group:
            user.groups.add(Group.objects.get(name=group))
        return user

    return make


@pytest.fixture
def operator(make_user):
    return make_user("olivia", "operator")


@pytest.fixture
def viewer(make_user):
    return make_user("victor", "viewer")
