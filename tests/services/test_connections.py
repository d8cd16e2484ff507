"""Connections: stored once, secrets encrypted and write-only at every door, keys rotated (issue 33, point 1)."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import connection as db

from scheduler.core.masking import MASK
from scheduler.models import AuditEntry, Connection, Schedule, Team
from scheduler.services.common import crypto
from scheduler.services.access.connections import connection_resolve, connection_set
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import PermissionRefused
from tests.api.conftest import api, make_token  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db
PASSWORD = "Wh-pa55word-for-tests-7c1"
URL = f"postgresql://loader:{PASSWORD}@db.example:5432/dwh?sslmode=require"
KEY = Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def keys(settings):
    """A key of our own: PostgreSQL runs have no development key (SQLite's is derived from SECRET_KEY)."""
    settings.ETL_CONNECTION_KEYS = [KEY]
    return settings


@pytest.fixture
def analytics(db):
    return Team.objects.create(name="analytics")


def _stored_text() -> str:
    """Everything the database holds of connections and the audit log, read past the ORM."""
    with db.cursor() as cursor:
        cursor.execute("SELECT * FROM scheduler_connection")
        rows = cursor.fetchall()
        cursor.execute("SELECT before, after, reason FROM scheduler_auditentry")
        rows += cursor.fetchall()
    return json.dumps(rows, default=str)


def _set_by_command(*args: str, stdin: str = "", monkeypatch=None) -> str:
    monkeypatch.setattr("sys.stdin", StringIO(stdin))
    out = StringIO()
    call_command("connection", *args, "--actor", "cli", stdout=out)
    return out.getvalue()


def test_the_command_stores_a_url_from_stdin_encrypted_and_shows_only_that_a_password_is_set(analytics, monkeypatch):
    said = _set_by_command("set", "warehouse", "--team", "analytics", "--url-stdin", stdin=URL + "\n",
                           monkeypatch=monkeypatch)
    assert "connection warehouse saved (team analytics, postgres)" in said
    row = Connection.objects.get(name="warehouse")
    assert (row.host, row.port, row.database, row.login, row.extra) == ("db.example", 5432, "dwh", "loader",
                                                                       {"sslmode": "require"})
    assert row.secret and PASSWORD not in _stored_text()  # encrypted at rest; the audit entry masks it
    shown = StringIO()
    call_command("connection", "show", "warehouse", "--json", stdout=shown)
    listed = StringIO()
    call_command("connection", "list", stdout=listed)
    assert json.loads(shown.getvalue())["password"] == MASK and PASSWORD not in shown.getvalue() + listed.getvalue()
    info = connection_resolve("warehouse", schedule=None)
    assert info.url == URL and info.source == "database"
    entry = AuditEntry.objects.get(action="connection.create")
    assert entry.after["password"] == MASK and entry.actor == "cli"


def test_a_password_on_the_command_line_is_refused(analytics):
    with pytest.raises(CommandError) as info:
        call_command("connection", "set", "warehouse", "--url", URL, stdout=StringIO())
    assert "standard input" in str(info.value) and not Connection.objects.exists()


@pytest.mark.parametrize("kwargs, field", [
    ({"name": "Bad-Name"}, "name"),
    ({"name": "ok", "port": 70000}, "port"),
    ({"name": "ok", "url": "not a url"}, "url"),
    ({"name": "ok", "kind": "ftp"}, "kind"),
    ({"name": "ok", "extra": {"nested": {"x": 1}}}, "extra"),
    ({"name": "ok", "password": "a\x00b"}, "password"),
])
def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(kwargs, field):
    with pytest.raises(ServiceError) as info:
        connection_set(actor="tests", **kwargs)
    assert info.value.field == field
    assert not Connection.objects.exists() and not AuditEntry.objects.filter(action__startswith="connection").exists()


def test_a_change_without_a_password_keeps_it_and_a_new_one_is_audited_masked(analytics):
    connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    connection_set(name="warehouse", actor="tests", host="db2.example")
    assert connection_resolve("warehouse", schedule=None).password == PASSWORD
    connection_set(name="warehouse", actor="tests", password="another-Secret-value-2")
    assert connection_resolve("warehouse", schedule=None).password == "another-Secret-value-2"
    entries = list(AuditEntry.objects.filter(action="connection.update").order_by("id").values_list("after", flat=True))
    assert entries[0] == {"host": "db2.example"} and entries[1] == {"password": MASK}
    assert "another-Secret-value-2" not in _stored_text()


def test_rotate_key_re_encrypts_every_stored_secret_so_the_old_key_may_leave(analytics, keys, make_schedule,
                                                                            monkeypatch):
    monkeypatch.setattr(crypto, "_embedded", lambda: False)  # no development key: the keys alone decide
    connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    make_schedule("c", target_kind="command", target_id="", command={"argv": ["true"], "env": {
        "PW": {"secret": "command-env-secret-9"}}})
    new = Fernet.generate_key().decode()
    keys.ETL_CONNECTION_KEYS = [new]  # the old key gone too soon: nothing opens
    with pytest.raises(ServiceError, match="cannot be decrypted"):
        connection_resolve("warehouse", schedule=None)
    keys.ETL_CONNECTION_KEYS = [new, KEY]
    out = StringIO()
    call_command("connection", "rotate-key", stdout=out)
    assert "re-encrypted 1 connection(s) and 1 command env secret(s)" in out.getvalue()
    keys.ETL_CONNECTION_KEYS = [new]  # now the old key may leave
    assert connection_resolve("warehouse", schedule=None).password == PASSWORD
    sealed = Schedule.objects.get(name="c").command["env"]["PW"]["encrypted"]
    assert crypto.decrypt(sealed) == "command-env-secret-9"
    assert AuditEntry.objects.filter(action="connection.rotate_key").count() == 1


def test_postgresql_without_keys_stores_no_secret(analytics, keys, monkeypatch):
    monkeypatch.setattr(crypto, "_embedded", lambda: False)
    keys.ETL_CONNECTION_KEYS = []
    with pytest.raises(ServiceError) as info:
        connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    assert info.value.field == "ETL_CONNECTION_KEYS" and not Connection.objects.exists()


def test_backends_are_asked_in_order_environment_files_database(analytics, keys, tmp_path, monkeypatch):
    connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    assert connection_resolve("warehouse", schedule=None).source == "database"
    keys.ETL_CONNECTIONS_DIR = str(tmp_path)
    (tmp_path / "warehouse").write_text("postgresql://files:file-pass-123@files.example/dwh\n")
    found = connection_resolve("warehouse", schedule=None)
    assert (found.source, found.host, found.password) == ("files", "files.example", "file-pass-123")
    monkeypatch.setenv("ETL_CONN_WAREHOUSE", "postgresql://env:env-pass-456@env.example/dwh")
    found = connection_resolve("warehouse", schedule=None)
    assert (found.source, found.host, found.password) == ("environment", "env.example", "env-pass-456")
    # declared only (no fields of its own): its URL from a backend; none at all is a clear error
    connection_set(name="mounted", actor="tests", owner="analytics", kind="postgres")
    with pytest.raises(ServiceError, match="ETL_CONN_MOUNTED"):
        connection_resolve("mounted", schedule=None)


def test_the_api_takes_secrets_and_never_answers_them(api, make_token, make_user, analytics):
    ana = make_user("ana", "operator")
    analytics.members.add(ana)
    token = make_token(ana)
    response = api.post("/connections", {"name": "warehouse", "owner": "analytics", "url": URL}, token=token)
    assert response.status_code == 201, response.content
    assert response.json()["password"] == MASK and PASSWORD not in response.content.decode()
    response = api.patch("/connections/warehouse", {"host": "db2.example"}, token=token)
    assert response.status_code == 200 and response.json()["host"] == "db2.example"
    for answer in (api.get("/connections", token=token), api.get("/connections/warehouse", token=token)):
        assert answer.status_code == 200 and PASSWORD not in answer.content.decode()
    assert connection_resolve("warehouse", schedule=None).password == PASSWORD
    # another team's operator may read the fields (viewing is open) but not change or delete them
    olga = make_user("olga", "operator")
    Team.objects.create(name="sales").members.add(olga)
    other = make_token(olga)
    assert api.patch("/connections/warehouse", {"password": "x-taken-over-1"}, token=other).status_code == 403
    assert api.delete("/connections/warehouse", token=other).status_code == 403
    assert api.post("/connections", {"name": "theirs", "owner": "analytics", "url": URL}, token=other).status_code \
        == 403
    assert connection_resolve("warehouse", schedule=None).password == PASSWORD


def test_the_admin_never_renders_a_password(client, make_user, analytics):
    client.force_login(make_user("ada", "admin", is_staff=True))
    connection = connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    page = client.get(f"/admin/scheduler/connection/{connection.pk}/change/").content.decode()
    assert "A password is set (***)" in page and PASSWORD not in page and connection.secret not in page
    response = client.post(f"/admin/scheduler/connection/{connection.pk}/change/", {
        "owner": analytics.pk, "kind": "postgres", "description": "", "scheme": "", "host": "db3.example",
        "port": "5432", "database": "dwh", "login": "loader", "extra": "{}", "password": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert connection_resolve("warehouse", schedule=None).password == PASSWORD  # empty keeps it
    assert Connection.objects.get(pk=connection.pk).host == "db3.example"


def test_a_connection_a_schedule_declares_cannot_be_deleted(analytics, make_schedule):
    connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    make_schedule("loader", owner="analytics", target_kind="command", target_id="",
                  command={"argv": ["true"], "connections": ["warehouse"]})
    with pytest.raises(CommandError, match="used by loader"):
        call_command("connection", "delete", "warehouse", stdout=StringIO())
    assert Connection.objects.filter(name="warehouse").exists()


def test_resolving_for_another_teams_schedule_is_refused(analytics, make_schedule):
    connection_set(name="warehouse", actor="tests", owner="analytics", url=URL)
    theirs = make_schedule("sales_job")  # the default team's
    with pytest.raises(PermissionRefused, match="may not use connection 'warehouse'"):
        connection_resolve("warehouse", schedule=theirs)


def test_a_schedules_file_declares_connections_that_its_schedules_use_and_never_shows_a_secret(analytics, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"""
version: 1
connections:
  - {{name: warehouse, owner: analytics, kind: postgres, host: db.example, port: 5432, database: dwh,
     login: loader, password: "{PASSWORD}"}}
schedules:
  - name: load
    owner: analytics
    target_kind: command
    command: {{argv: ["true"], connections: [warehouse]}}
""")
    out = StringIO()
    call_command("apply_schedules", str(path), "--dry-run", stdout=out)
    assert "+ create connection warehouse" in out.getvalue() and "+ create load" in out.getvalue()
    assert not Connection.objects.exists() and not Schedule.objects.filter(name="load").exists()
    call_command("apply_schedules", str(path), stdout=out)
    assert PASSWORD not in out.getvalue() and PASSWORD not in _stored_text()
    assert connection_resolve("warehouse", schedule=Schedule.objects.get(name="load")).password == PASSWORD
    # "***" (or no password) keeps the stored one; the plan says unchanged
    path.write_text(path.read_text().replace(PASSWORD, "***"))
    again = StringIO()
    call_command("apply_schedules", str(path), "--dry-run", stdout=again)
    assert "= unchanged connection warehouse" in again.getvalue()
    call_command("apply_schedules", str(path), stdout=StringIO())
    assert connection_resolve("warehouse", schedule=None).password == PASSWORD


def test_a_bad_connection_in_a_file_changes_nothing(analytics, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("connections:\n  - {name: warehouse, owner: analytics, port: 99999}\n  - {name: Bad}\n"
                    "schedules: []\n")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("apply_schedules", str(path), stdout=StringIO(), stderr=err)
    assert "connections[0] (warehouse): port" in err.getvalue() and "connections[1]: name" in err.getvalue()
    assert not Connection.objects.exists()
