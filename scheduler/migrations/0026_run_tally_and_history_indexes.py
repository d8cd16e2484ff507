"""Counters of runs by final status (services/tally.py), so /metrics never counts the ledger; an index on
finished_at for the scrape's last hour, and one on (schedule, status, -id) of live runs for the overview's
failing schedules (issue 25). The counters start from the runs already in the ledger:
one count, here, instead of one per scrape."""

from django.db import migrations, models
from django.db.models import Count

FINAL = ("SUCCEEDED", "FAILED", "BLOCKED", "SKIPPED", "CANCELLED")


def seed(apps, schema_editor):
    Run, RunTally = apps.get_model("scheduler", "Run"), apps.get_model("scheduler", "RunTally")
    counts = Run.objects.filter(status__in=FINAL).values_list("status").annotate(n=Count("id")).order_by()
    RunTally.objects.bulk_create([RunTally(status=status, n=n) for status, n in counts])


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0025_run_admitted_and_waiting_idx'),
    ]

    operations = [
        migrations.CreateModel(
            name='RunTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(help_text='The final status the runs reached.', max_length=16)),
                ('n', models.BigIntegerField(help_text='How many runs reached it.')),
            ],
        ),
        migrations.RunPython(seed, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['finished_at'], name='run_finished_at_idx'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('backfill__isnull', True)), fields=['schedule', 'status', '-id'], name='run_sched_verdict_idx'),
        ),
    ]
