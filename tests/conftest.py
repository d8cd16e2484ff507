"""Shared fixtures: time is injected (`now`), data is made by small factories."""
from __future__ import annotations

from datetime import datetime, timezone

import threading

import pytest


def restore_migration_data() -> None:
    """A transactional test's flush drops the groups and workload classes migration 0002 made: put them back."""
    from importlib import import_module

    from django.contrib.auth.models import Group, Permission

    from scheduler.models import Team, WorkloadClass

    admin = Group.objects.filter(name="admin").first()
    if (admin is not None and WorkloadClass.objects.filter(name="critical").exists()
            and admin.permissions.filter(codename__in=["act_for_all_teams", "change_user", "add_connection"]).count()
            == 3):
        Team.default_team_id()
        return
    spec = import_module("scheduler.migrations.0002_groups_and_classes")
    crud = [f"{a}_{m}" for m in spec.CRUD_MODELS for a in ("add", "change", "delete")]
    for name, codenames in [("viewer", spec.VIEW), ("operator", spec.VIEW + spec.OPERATE),
                            ("admin", spec.VIEW + spec.OPERATE + crud)]:
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(Permission.objects.filter(content_type__app_label="scheduler", codename__in=codenames))
    # what the teams migration grants
    team_admin = ["act_for_all_teams", "view_team", "add_team", "change_team", "delete_team"]
    for name, codenames in [("admin", team_admin), ("operator", ["view_team"]), ("viewer", ["view_team"])]:
        Group.objects.get(name=name).permissions.add(
            *Permission.objects.filter(content_type__app_label="scheduler", codename__in=codenames))
    # what migration 0019 grants (acknowledging failures; the admin group manages users)
    for name, wanted in import_module("scheduler.migrations.0024_failure_acks_and_user_admin").GRANTS.items():
        Group.objects.get(name=name).permissions.add(*[
            Permission.objects.get(content_type__app_label=app, codename=codename) for app, codename in wanted])
    for name, wanted in import_module("scheduler.migrations.0031_connections").GRANTS.items():  # issue 33
        Group.objects.get(name=name).permissions.add(*Permission.objects.filter(
            content_type__app_label="scheduler", codename__in=wanted))
    Team.default_team_id()
    for name, limit in [("standard", 4), ("heavy", 1), ("critical", 2)]:
        WorkloadClass.objects.get_or_create(name=name, defaults={"concurrency_limit": limit})


# What setup_demo and the demo's pipelines write; a test's process and the processes it starts write them here
DEMO_PATHS = ("ETL_DEMO_LOGINS_FILE", "ETL_FILES_DIR", "ETL_DEMO_SOURCE_DB", "ETL_DEMO_WAREHOUSE_DB",
              "ETL_DEMO_REPORT_DIR")


def pytest_configure(config):
    _flush_postgresql_by_delete()
    _demo_files_outside_the_working_tree()


def _demo_files_outside_the_working_tree() -> None:
    """The demo's files and logins in a directory of this test process's own, never the working tree's var/.

    setup_demo writes the logins it creates to ETL_DEMO_LOGINS_FILE: a test that ran it without pointing that
    elsewhere replaced a developer's var/demo-logins.txt (from `make run`) with passwords of a test database. Set in
    the settings and in the environment, so the clusters and commands a test starts write there too."""
    import atexit
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from django.conf import settings

    base = Path(tempfile.mkdtemp(prefix="etl-test-var-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    files = base / "files"
    values = dict(zip(DEMO_PATHS, (base / "demo-logins.txt", files, files / "demo_source.sqlite3",
                                   files / "demo_warehouse.sqlite3", files / "reports")))
    for name, value in values.items():
        os.environ[name] = str(value)
        setattr(settings, name, str(value))


def _flush_postgresql_by_delete() -> None:
    """A transactional test's flush empties every table with DELETE on PostgreSQL, not Django's TRUNCATE.

    The end is the same (every table empty, sequences left as they are), but TRUNCATE of some fifty tables costs about
    a second a test (a new file per table, an exclusive lock on each), DELETE of a test's few rows a tenth of that:
    minutes of the PostgreSQL pass. The foreign keys Django makes are deferrable, so the order does not matter.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or allow_cascade or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        return ["SET CONSTRAINTS ALL DEFERRED;", *(f"DELETE FROM {self.quote_name(table)};" for table in tables)]

    DatabaseOperations.sql_flush = sql_flush


@pytest.fixture(autouse=True)
def _migration_data(request):
    """Tests that use the database always see the data the migrations create."""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    wanted = {"db", "transactional_db", "live_server"} - set(
        params
    )  # a parametrize argument named db is not the fixture
    if request.node.get_closest_marker("django_db") or wanted & set(request.fixturenames):
        request.getfixturevalue("transactional_db" if _is_transactional(request) else "db")
        restore_migration_data()
    yield


def _is_transactional(request) -> bool:
    marker = request.node.get_closest_marker("django_db")
    if "transactional_db" in request.fixturenames or "live_server" in request.fixturenames:
        return True
    return bool(marker and (marker.kwargs.get("transaction") or (marker.args and marker.args[0])))


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
    from scheduler.services.definitions.schedules import schedule_save

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
def default_team(db):
    from scheduler.models import Team

    return Team.objects.get(pk=Team.default_team_id())


@pytest.fixture
def operator(make_user, default_team):
    """An operator of the default team, which owns every schedule made without an owner."""
    user = make_user("olivia", "operator")
    default_team.members.add(user)
    return user


@pytest.fixture
def viewer(make_user):
    return make_user("victor", "viewer")


@pytest.fixture
def throwaway_redis():
    """A redis-server of the test's own on a free port (never the machine's): flush or restart it freely."""
    from tests.throwaway import ThrowawayRedis, Unavailable

    try:
        server = ThrowawayRedis()
    except Unavailable as exc:
        pytest.skip(f"needs a throwaway Redis: {exc}")
    try:
        yield server.start()
    finally:
        server.stop()


def _utf8_safe(value):
    """`value` with every string UTF-8 encodable: a lone surrogate shown as its escape (\\udce9)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_utf8_safe(k): _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_utf8_safe(v) for v in value)
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_report_to_serializable(config, report):
    """A test report crosses pytest-xdist's channel as UTF-8: the hostile-input tests' captured logs and messages
    may hold a lone surrogate, which would end the whole session (execnet: strings must be utf-8 encodable)."""
    outcome = yield
    data = outcome.get_result()
    if data is not None:
        outcome.force_result(_utf8_safe(data))


@pytest.fixture(autouse=True)
def _no_pump_beat_inside_a_test_transaction(request, monkeypatch):
    """Every test that runs inside a transaction it rolls back (`django_db` without `transaction=True`): the worker's
    heartbeat pump, a thread of this process with a connection of its own, does not beat.

    On PostgreSQL that connection sees none of the test's uncommitted rows, so a beat that fell during a run the test
    executes in its own process touched nothing and rightly fenced the run: it stayed RUNNING, or lost its last log
    lines. The pump lives as long as the xdist worker and beats every 5 s on its own clock, so any such run that
    lasted a moment (a command's subprocess) met a beat now and then (test_setup_demo's command target, and
    test_cancel_logs, each once in a `make test`). Beats the test calls itself still happen; transactional tests,
    whose rows the pump sees, keep their beats."""
    uses_db = request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & set(request.fixturenames)
    if not uses_db or _is_transactional(request):
        yield
        return
    from scheduler.services.cluster.heartbeats import HeartbeatPump

    beat = HeartbeatPump.beat

    def beat_unless_the_pumps_own(self, now):
        if threading.current_thread() is self:
            return 0
        return beat(self, now)

    monkeypatch.setattr(HeartbeatPump, "beat", beat_unless_the_pumps_own)
    yield


@pytest.fixture
def no_beat_during_the_run(settings):
    """A heartbeat pump of this test's own that beats once a minute (it still reads stop requests every second).

    For runs executed in the test's process inside its transaction: the pump beats on its own connection, which on
    PostgreSQL sees none of the uncommitted run, so a beat during the run (a pump left with a short interval by an
    earlier test, or a slow machine) touches nothing and fences it, and lines it saves are not the test's."""
    from scheduler.services.cluster.heartbeats import HeartbeatPump

    settings.ETL_HEARTBEAT_SECONDS = 60
    HeartbeatPump.forget()
    yield
    HeartbeatPump.forget()
