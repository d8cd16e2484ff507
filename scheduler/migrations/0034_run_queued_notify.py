"""PostgreSQL: a transaction that queues a run sends NOTIFY etl_run_queued, which wakes the dispatch loop at commit.

Two triggers on the run table, so every door that queues a run (a manual trigger, an event, a fire, a backfill's
pump, a retry, a lost run's requeue, a re-run) wakes it without a statement of its own: one per INSERT statement,
when the statement inserted a QUEUED run that may start now, and one per row that becomes QUEUED (a requeue, a
waiting run released) without a back-off still ahead. PostgreSQL delivers a transaction's identical notifications
once, at commit, and none from a rolled-back one. `-c etl.dispatch_wake=off` in a connection's options (the setting
ETL_DISPATCH_WAKE=0) silences them. See scheduler/services/admission/wakeup.py; SQLite has no NOTIFY and keeps the poll.
"""
from django.db import migrations

WAKE_ON = "current_setting('etl.dispatch_wake', true) IS DISTINCT FROM 'off'"
NOTIFY = "PERFORM pg_notify('etl_run_queued', '')"

CREATE = [
    f"CREATE FUNCTION etl_run_queued_notify() RETURNS trigger LANGUAGE plpgsql AS $$"
    f" BEGIN IF {WAKE_ON} THEN {NOTIFY}; END IF; RETURN NULL; END $$",
    # a statement's inserted rows: one call per INSERT, however many runs it inserts
    f"CREATE FUNCTION etl_runs_inserted_notify() RETURNS trigger LANGUAGE plpgsql AS $$"
    f" BEGIN IF {WAKE_ON} AND EXISTS (SELECT FROM etl_inserted WHERE status = 'QUEUED'"
    f" AND (not_before IS NULL OR not_before <= now())) THEN {NOTIFY}; END IF; RETURN NULL; END $$",
    "CREATE TRIGGER etl_run_inserted_wake AFTER INSERT ON scheduler_run REFERENCING NEW TABLE AS etl_inserted"
    " FOR EACH STATEMENT EXECUTE FUNCTION etl_runs_inserted_notify()",
    # a row trigger whose WHEN is read without a call: an UPDATE that does not queue a run costs nothing more
    "CREATE TRIGGER etl_run_requeued_wake AFTER UPDATE OF status ON scheduler_run FOR EACH ROW"
    " WHEN (NEW.status = 'QUEUED' AND OLD.status <> 'QUEUED' AND (NEW.not_before IS NULL OR NEW.not_before <= now()))"
    " EXECUTE FUNCTION etl_run_queued_notify()",
]

DROP = [
    "DROP TRIGGER IF EXISTS etl_run_requeued_wake ON scheduler_run",
    "DROP TRIGGER IF EXISTS etl_run_inserted_wake ON scheduler_run",
    "DROP FUNCTION IF EXISTS etl_runs_inserted_notify()",
    "DROP FUNCTION IF EXISTS etl_run_queued_notify()",
]


def _on_postgresql(statements: list[str]):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql, params=None)
    return apply


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0033_schedule_source_and_deleting'),
    ]

    operations = [
        migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP)),
    ]
