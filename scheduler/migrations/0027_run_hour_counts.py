"""Final runs counted per schedule, UTC hour and status (services/hour_counts.py), so the timeline's crowded
ranges never scan the ledger (issue 25). The counts start from the runs already in the ledger: one INSERT ...
SELECT ... GROUP BY over them (each run in the row of its start hour, and a run that ended in a later hour again in
the row of both hours), written in the order of the hours (a range's rows lie together), before the indexes are
built (one pass each, not one entry per row). Self-contained: the SQL is copied here, not imported.
"""

import django.db.models.deletion
from django.db import migrations, models

STATUSES = ("SUCCEEDED", "FAILED", "SKIPPED", "BLOCKED", "CANCELLED")


def _hour(vendor: str, column_sql: str) -> str:
    if vendor == "postgresql":
        return f"date_trunc('hour', {column_sql}, 'UTC')"
    return f"strftime('%Y-%m-%d %H:00:00', {column_sql})"


def backfill(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    hour = _hour(vendor, "COALESCE(started_at, queued_at)")
    end_hour = _hour(vendor, "COALESCE(finished_at, started_at, queued_at)")
    counts = ", ".join(f"SUM(CASE WHEN status = '{s}' THEN 1 ELSE 0 END)" for s in STATUSES)
    folded = "TRUE" if vendor == "postgresql" else "1"
    runs = f"FROM scheduler_run WHERE status IN ({', '.join(repr(s) for s in STATUSES)})"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(  # no parameters: a literal % stays single
            f"INSERT INTO scheduler_runhourcount (schedule_id, hour, end_hour, succeeded, failed, skipped, blocked,"
            f" cancelled, folded)"
            f" SELECT schedule_id, {hour}, {hour}, {counts}, {folded} {runs} GROUP BY schedule_id, {hour}"
            f" UNION ALL SELECT schedule_id, {hour}, {end_hour}, {counts}, {folded} {runs} AND {end_hour} > {hour}"
            f" GROUP BY schedule_id, {hour}, {end_hour} ORDER BY 2, 1")


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
                ('end_hour', models.DateTimeField(help_text='The hour itself: every run that started in it; a later hour: those of them that ended in that hour.')),
                ('succeeded', models.IntegerField(default=0, help_text='Runs that SUCCEEDED (negative: pruned, not folded yet).')),
                ('failed', models.IntegerField(default=0, help_text='Runs that FAILED.')),
                ('skipped', models.IntegerField(default=0, help_text='Runs that were SKIPPED.')),
                ('blocked', models.IntegerField(default=0, help_text='Runs that were BLOCKED.')),
                ('cancelled', models.IntegerField(default=0, help_text='Runs that were CANCELLED.')),
                ('folded', models.BooleanField(default=False, help_text='One row per key, summed by governance.')),
                ('schedule', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='scheduler.schedule')),
            ],
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='runhourcount',
            index=models.Index(condition=models.Q(('end_hour', models.F('hour'))), fields=['hour'], name='runhour_hour_idx'),
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
            constraint=models.UniqueConstraint(condition=models.Q(('folded', True)), fields=('schedule', 'hour', 'end_hour'), name='runhour_folded_key'),
        ),
    ]
