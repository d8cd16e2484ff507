"""Every secret the process knows is masked as text is written (issue 33, point 4)."""
from __future__ import annotations

import hashlib
import json
import logging
import sys
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.db import connection

from scheduler.core import Outcome, Pipeline, RunRecord
from scheduler.core.masking import MASK, Masker, masker
from scheduler.models import AuditEntry, NodeRecord, Run, RunLogLine, RunStatus, Schedule
from scheduler.pipelines import registry
from scheduler.pipelines.noop import NoopSink
from scheduler.services.common.audit import audit_record
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.execution import execute_run
from scheduler.services.common.masking import mask_register, mask_register_server, server_secrets
from scheduler.services.runs.logs import Line, RunLogCapture, insert_lines
from scheduler.services.runs.nodes import NodeLedger
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedule_files import schedules_export
from tests.api.conftest import admin_token, admin_user, api, make_token  # noqa: F401 - fixtures

PY = sys.executable
KNOWN = "known-secret-Zq81xv3-masking"
SERVER_KEY = "server-secret-key-for-the-masking-tests-0123456789"
ENV_SECRET = "warehouse-Pa55word-env-9f2"


@pytest.fixture(autouse=True)
def keys(settings):
    """A key of our own: PostgreSQL runs have no development key for the env values marked secret."""
    settings.ETL_CONNECTION_KEYS = [Fernet.generate_key().decode()]


# --- the masker itself (pure) -----------------------------------------------------

def test_the_masker_replaces_every_form_of_a_secret_and_keeps_the_rest():
    m = Masker()
    m.add("p@ss word/Long-1")
    m.add("abc")  # too short to mask: masking it would mask every "abc"
    text = 'url postgres://u:p%40ss%20word%2FLong-1@h/db json "p@ss word/Long-1" abc'
    assert m.mask(text) == f'url postgres://u:{MASK}@h/db json "{MASK}" abc'
    assert m.mask_data({"k": ["x p@ss word/Long-1", 3, None], "p@ss word/Long-1": True}) == \
        {"k": [f"x {MASK}", 3, None], MASK: True}


def test_a_secret_containing_another_is_masked_whole():
    m = Masker()
    m.add("secret-one")
    m.add("secret-one-and-more")
    assert m.mask("a secret-one-and-more b secret-one") == f"a {MASK} b {MASK}"


def test_the_servers_own_secrets_are_known(settings, monkeypatch):
    settings.SECRET_KEY = SERVER_KEY
    settings.ETL_METRICS_TOKEN = "metrics-token-masked-1"
    settings.REDIS_URL = "redis://:redis-pass-masked-2@cache:6379/0"
    monkeypatch.setenv("SOME_API_TOKEN", "api-token-masked-3")
    monkeypatch.setenv("OPENLINEAGE_URL", "https://ol:lineage-pass-4@ol.example/api")
    monkeypatch.setenv("HARMLESS", "just-a-value")
    found = server_secrets()
    for secret in (SERVER_KEY, "metrics-token-masked-1", "redis-pass-masked-2", "api-token-masked-3",
                   "lineage-pass-4"):
        assert secret in found
    assert "just-a-value" not in found


# --- where text is written --------------------------------------------------------------

@pytest.mark.django_db
def test_every_masked_field_masks_on_every_write_path(make_schedule, now):
    mask_register(KNOWN)
    schedule = make_schedule("m1")
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"day": "x"}, now=now)
    Run.objects.filter(pk=run.pk).update(error=f"boom {KNOWN}", reason=f"because {KNOWN}",
                                         report={"records": [{"reason": KNOWN}]})
    RunLogLine.objects.bulk_create([RunLogLine(run=run, seq=1, at=now, level="INFO", source="x",
                                               message=f"printed {KNOWN}")])
    NodeRecord.objects.create(run=run, task_id="n", outcome="FAILED", started_at=now, finished_at=now,
                              reason=KNOWN, error=f"Traceback ... {KNOWN}")
    audit_record(actor="tests", action="x.test", target=schedule, before={"v": KNOWN}, after={"v": [KNOWN]},
                 reason=f"r {KNOWN}")
    # the worker's own writers, plain SQL that passes no field: a node's record and a run's log lines
    NodeLedger(run).append(RunRecord("n2", Outcome.FAILED, now, now, reason=f"r {KNOWN}", error=f"tb {KNOWN}"))
    insert_lines([Line(run.pk, 2, now, "INFO", "x", f"said {KNOWN}", "")])
    with connection.cursor() as cursor:  # what the database holds, read past the ORM
        for table in ("scheduler_run", "scheduler_runlogline", "scheduler_noderecord", "scheduler_auditentry"):
            cursor.execute(f"SELECT * FROM {table}")
            assert KNOWN not in json.dumps(cursor.fetchall(), default=str), table
    run.refresh_from_db()
    assert run.error == f"boom {MASK}" and run.report == {"records": [{"reason": MASK}]}


@pytest.mark.django_db
def test_a_pipeline_that_logs_and_raises_the_servers_secret_leaves_only_the_mask(make_schedule, now, settings):
    settings.SECRET_KEY = SERVER_KEY
    mask_register_server()

    class Leaky:
        def extract(self):
            logging.getLogger("team.pipeline").warning("connecting with %s", settings.SECRET_KEY)
            raise RuntimeError(f"login failed for key {settings.SECRET_KEY}")

    registry.register_pipeline("test.leaky", lambda ctx: Pipeline(Leaky(), None, NoopSink()), replace=True)
    try:
        schedule = make_schedule("leaky", target_id="test.leaky", retry_max_attempts=1)
        run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
        admit_runs(now=now, holder="t")
        run.refresh_from_db()
        execute_run(run.pk, run.dispatch_token)
    finally:
        registry._pipelines.pop("test.leaky", None)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and MASK in run.reason and MASK in run.error
    stored = "\n".join(RunLogLine.objects.filter(run=run).values_list("message", flat=True))
    assert f"connecting with {MASK}" in stored
    assert SERVER_KEY not in stored + run.reason + run.error


@pytest.mark.django_db
def test_the_runs_of_a_batch_log_the_servers_secret_only_as_the_mask(make_schedule, now, settings):
    """A deep queue's runs share a broker message and their lines are written together (captures_store): masked
    there too, read past the ORM (the batch's lines once went in by plain SQL, unmasked)."""
    from scheduler.services.cluster.batch import execute_runs

    settings.SECRET_KEY = SERVER_KEY
    mask_register_server()

    class Chatty:
        def extract(self):
            logging.getLogger("team.pipeline").warning("connecting with %s", settings.SECRET_KEY)
            return []

    registry.register_pipeline("test.chatty_secret", lambda ctx: Pipeline(Chatty(), None, NoopSink()), replace=True)
    try:
        schedule = make_schedule("chatty-secret", target_id="test.chatty_secret", retry_max_attempts=1)
        runs = [run_trigger_manual(schedule=schedule, actor="tests", now=now) for _ in range(3)]
        admit_runs(now=now, holder="t")
        pairs = list(Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("pk").values_list("pk", "dispatch_token"))
        assert execute_runs(pairs, clock=lambda: now) == {pk: RunStatus.SUCCEEDED for pk, _ in pairs}
    finally:
        registry._pipelines.pop("test.chatty_secret", None)
    with connection.cursor() as cursor:
        cursor.execute("SELECT run_id, message FROM scheduler_runlogline WHERE message LIKE %s", ["connecting with%"])
        stored = cursor.fetchall()
    assert sorted(stored) == [(pk, f"connecting with {MASK}") for pk, _ in pairs]


# --- a command's env values marked secret -------------------------------------------------

# the command checks the value through its digest: the secret itself appears nowhere but in the env
DIGEST = hashlib.sha256(ENV_SECRET.encode()).hexdigest()
CHECKS = ("import hashlib, os, sys; v = os.environ['WAREHOUSE_PASSWORD']; print('password is', v); "
          f"sys.exit(0 if hashlib.sha256(v.encode()).hexdigest() == {DIGEST!r} else 3)")


@pytest.mark.django_db
def test_an_env_value_marked_secret_is_encrypted_masked_everywhere_and_reaches_the_command(api, admin_token, now):
    command = {"argv": [PY, "-c", CHECKS], "env": {"WAREHOUSE_PASSWORD": {"secret": ENV_SECRET}, "REGION": "eu"}}
    response = api.post("/schedules", {"name": "loader", "target_kind": "command", "target_id": "",
                                       "trigger_kind": "manual", "command": command}, token=admin_token)
    assert response.status_code == 201, response.content
    shown = response.json()["spec"]["command"]["env"]
    assert shown == {"WAREHOUSE_PASSWORD": {"secret": MASK}, "REGION": "eu"}
    stored = Schedule.objects.get(name="loader").command["env"]["WAREHOUSE_PASSWORD"]
    assert set(stored) == {"encrypted"} and ENV_SECRET not in json.dumps(stored)  # encrypted at rest
    # the masked form sent back keeps the value; the audit log never holds it
    response = api.patch("/schedules/loader", {"command": {**command, "env": {**shown, "REGION": "us"}}},
                         token=admin_token)
    assert response.status_code == 200, response.content
    assert Schedule.objects.get(name="loader").command["env"]["WAREHOUSE_PASSWORD"] == stored
    audit = json.dumps(list(AuditEntry.objects.values_list("before", "after")))
    assert ENV_SECRET not in audit and stored["encrypted"] not in audit and MASK in audit
    # the command gets the real value; what it prints of it is masked in its log
    run = run_trigger_manual(schedule=Schedule.objects.get(name="loader"), actor="tests", now=now)
    admit_runs(now=now, holder="t")
    run.refresh_from_db()
    execute_run(run.pk, run.dispatch_token)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, (run.reason, run.error)
    assert list(RunLogLine.objects.filter(run=run, source="stdout").values_list("message", flat=True)) == \
        [f"password is {MASK}"]
    # the schedules file shows the mask, and applying it back changes nothing
    exported = schedules_export(["loader"])
    assert "WAREHOUSE_PASSWORD:\n        secret: '***'" in exported and stored["encrypted"] not in exported


@pytest.mark.django_db
def test_a_masked_value_with_nothing_stored_or_a_foreign_token_is_refused(api, admin_token):
    base = {"name": "c", "target_kind": "command", "target_id": "", "trigger_kind": "manual"}
    response = api.post("/schedules", {**base, "command": {"argv": ["true"], "env": {"PW": {"secret": MASK}}}},
                        token=admin_token)
    assert response.status_code == 422 and "no stored secret to keep" in response.content.decode()
    response = api.post("/schedules", {**base, "command": {"argv": ["true"], "env": {"PW": {"encrypted": "gAAA"}}}},
                        token=admin_token)
    assert response.status_code == 422 and 'give a secret value as {\\"secret\\"' in response.content.decode()
    assert not Schedule.objects.filter(name="c").exists()


@pytest.mark.django_db
def test_the_admin_form_and_the_export_round_trip_keep_the_secret(client, make_user, make_schedule, tmp_path):
    client.force_login(make_user("ada", "admin", is_staff=True))
    schedule = make_schedule("c2", target_kind="command", target_id="",
                             command={"argv": ["true"], "env": {"PW": {"secret": ENV_SECRET}}})
    stored = Schedule.objects.get(pk=schedule.pk).command
    response = client.get(f"/admin/scheduler/schedule/{schedule.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert ENV_SECRET not in page and stored["env"]["PW"]["encrypted"] not in page and "&quot;***&quot;" in page
    path = tmp_path / "s.yaml"
    path.write_text(schedules_export(["c2"]))
    out = StringIO()
    call_command("apply_schedules", str(path), "--dry-run", stdout=out)
    assert "unchanged" in out.getvalue() and ENV_SECRET not in out.getvalue()
    call_command("apply_schedules", str(path), stdout=StringIO())
    assert Schedule.objects.get(pk=schedule.pk).command == stored
    assert masker.mask(ENV_SECRET) == MASK  # what it learnt stays masked in this process


def test_a_secret_across_a_cut_leaves_none_of_its_characters(make_schedule, now):
    """A node's reason is cut at 500 characters and a log line at ETL_RUN_LOG_MAX_LINE: cut first and masked after,
    a secret across the cut left its first characters, which no mask matches."""
    mask_register(KNOWN)
    run = run_trigger_manual(schedule=make_schedule("cut"), actor="tests", now=now)
    NodeLedger(run).append(RunRecord("n", Outcome.FAILED, now, now, reason="x" * 495 + KNOWN, error=""))
    capture = RunLogCapture(run.pk, max_bytes=1 << 20, max_line=200, level=logging.INFO, clock=lambda: now)
    capture.add("y" * 195 + KNOWN, level="INFO", source="x", at=now)
    insert_lines(capture.take())
    with connection.cursor() as cursor:  # past the ORM
        cursor.execute("SELECT reason FROM scheduler_noderecord WHERE run_id = %s", [run.pk])
        (reason,) = cursor.fetchone()
        cursor.execute("SELECT message FROM scheduler_runlogline WHERE run_id = %s", [run.pk])
        (message,) = cursor.fetchone()
    assert reason == "x" * 495 + MASK
    assert message == "y" * 195 + MASK
