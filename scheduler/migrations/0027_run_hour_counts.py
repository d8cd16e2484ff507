"""Final runs counted per schedule, UTC hour and status (services/hour_counts.py), so the timeline's crowded
ranges never scan the ledger (issue 25). The counts start from the runs already in the ledger: one INSERT ...
SELECT ... GROUP BY over them, written in the order of the hours (a range's rows lie together), before the
indexes are built (one pass each, not one entry per row). Self-contained: the SQL is copied here, not imported.
"""

import django.db.models.deletion
from django.db import migrations, models

FINAL = ("BLOCKED", "CANCELLED", "FAILED", "SKIPPED", "SUCCEEDED")


def _hour(vendor: str, column_sql: str) -> str:
    if vendor == "postgresql":
        return f"date_trunc('hour', {column_sql}, 'UTC')"
    return f"strftime('%Y-%m-%d %H:00:00', {column_sql})"


def backfill(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    hour = _hour(vendor, "COALESCE(started_at, queued_at)")
    end_hour = _hour(vendor, "COALESCE(finished_at, started_at, queued_at)")
    folded = "TRUE" if vendor == "postgresql" else "1"
    final = ", ".join(f"'{s}'" for s in FINAL)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(  # no parameters: a literal % stays single
            f"INSERT INTO scheduler_runhourcount (schedule_id, hour, end_hour, status, n, folded)"
            f" SELECT schedule_id, {hour}, {end_hour}, status, COUNT(*), {folded} FROM scheduler_run"
            f" WHERE status IN ({final}) GROUP BY schedule_id, {hour}, {end_hour}, status ORDER BY 2, 1")


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0026_run_tally_and_history_indexes'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunHourCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField(help_text='The UTC hour the runs started in (were queued in, if they never started).')),
                ('end_hour', models.DateTimeField(help_text='The UTC hour the runs ended in.')),
                ('status', models.CharField(help_text='The final status the runs reached.', max_length=16)),
                ('n', models.BigIntegerField(help_text='How many runs (negative: pruned runs not folded yet).')),
                ('folded', models.BooleanField(default=False, help_text='One row per key, summed by governance.')),
                ('schedule', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='scheduler.schedule')),
            ],
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='runhourcount',
            index=models.Index(fields=['hour'], name='runhour_hour_idx'),
        ),
        migrations.AddIndex(
            model_name='runhourcount',
            index=models.Index(fields=['schedule', 'hour'], name='runhour_sched_hour_idx'),
        ),
        migrations.AddIndex(
            model_name='runhourcount',
            index=models.Index(condition=models.Q(('end_hour__gt', models.F('hour'))), fields=['end_hour'], name='runhour_reaching_idx'),
        ),
        migrations.AddIndex(
            model_name='runhourcount',
            index=models.Index(condition=models.Q(('folded', False)), fields=['id'], name='runhour_unfolded_idx'),
        ),
        migrations.AddConstraint(
            model_name='runhourcount',
            constraint=models.UniqueConstraint(condition=models.Q(('folded', True)), fields=('schedule', 'hour', 'end_hour', 'status'), name='runhour_folded_key'),
        ),
    ]
