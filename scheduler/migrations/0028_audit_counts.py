"""The audit report's counts kept per hour, team, actor and action as entries are written (AuditCount, issue 25),
so the report reads a few rows per hour instead of grouping 31 days of the log three ways. The table starts
from the entries already in the log: one INSERT ... SELECT ... GROUP BY, here (services/audit_counts.py
`audit_counts_from_log` is the same statement for the benchmark's generated history)."""

from django.db import migrations, models

# the UTC start of an entry's hour: PostgreSQL truncates in UTC whatever the session's zone; SQLite stores a
# datetime as UTC text 'YYYY-MM-DD HH:MM:SS[.ffffff]', the form the ORM writes and compares
HOUR = {"postgresql": "date_trunc('hour', at, 'UTC')", "sqlite": "strftime('%Y-%m-%d %H:00:00', at)"}


def backfill_sql(vendor: str) -> str:
    return ("INSERT INTO scheduler_auditcount (hour, team_id, actor, action, n, folded)"
            f" SELECT {HOUR[vendor]}, team_id, actor, action, COUNT(*), TRUE FROM scheduler_auditentry"
            " GROUP BY 1, 2, 3, 4 ORDER BY 1")  # in time order, as folds append them: a range is a few pages


def backfill(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute(backfill_sql(connection.vendor))


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0027_run_hour_counts'),
    ]

    operations = [
        migrations.CreateModel(
            name='AuditCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField(help_text="UTC start of the hour of the entries' `at`.")),
                ('team_id', models.BigIntegerField(blank=True, help_text="The entries' team_id (as AuditEntry's).", null=True)),
                ('actor', models.CharField(max_length=150)),
                ('action', models.CharField(max_length=64)),
                ('n', models.BigIntegerField(help_text='How many entries; negative for entries deleted after their archive.')),
                ('folded', models.BooleanField(default=False, help_text="A fold's sum of its key (one per key, give or take a race); false: a delta.")),
            ],
            options={
                'indexes': [models.Index(fields=['hour'], name='auditcount_hour_idx'), models.Index(condition=models.Q(('folded', False)), fields=['id'], name='auditcount_delta_idx')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
