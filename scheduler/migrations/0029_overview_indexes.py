"""Each schedule's latest success and failure kept as runs end (`LatestOutcome`, services/outcomes.py), and a
partial index of the runs lost with their worker: the overview reads a row per schedule and the few lost runs
instead of the ledger (issue 25). The rows start from the ledger already there: a few index seeks per schedule,
the same ones services/outcomes.py `outcomes_rebuild` makes."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Max, OuterRef, Subquery


def seed(apps, schema_editor):
    Run, Schedule = apps.get_model("scheduler", "Run"), apps.get_model("scheduler", "Schedule")
    Backfill, LatestOutcome = apps.get_model("scheduler", "Backfill"), apps.get_model("scheduler", "LatestOutcome")

    def latest(**filters):
        return Subquery(Run.objects.filter(schedule=OuterRef("pk"), **filters).order_by("-id").values("id")[:1])

    success = (Run.objects.filter(schedule=OuterRef("pk"), status="SUCCEEDED", finished_at__isnull=False)
               .order_by("-finished_at", "-id"))
    rows = Schedule.objects.order_by("pk").annotate(
        live_ok=latest(status="SUCCEEDED", backfill__isnull=True),
        live_failed=latest(status="FAILED", backfill__isnull=True),
        ok=Subquery(success.values("id")[:1]), ok_at=Subquery(success.values("finished_at")[:1]),
    ).values_list("pk", "live_ok", "live_failed", "ok", "ok_at")
    # backfill windows' failures through the backfills' own runs (run_backfill index), not a walk of the ledger
    backfills = dict(Backfill.objects.values_list("pk", "schedule_id"))
    windows: dict[int, int] = {}
    for backfill_id, top in (Run.objects.filter(backfill_id__in=list(backfills), status="FAILED").order_by()
                             .values_list("backfill_id").annotate(top=Max("id"))) if backfills else ():
        windows[backfills[backfill_id]] = max(windows.get(backfills[backfill_id], 0), top)
    rows = [(pk, live_ok, live_failed, max(live_failed or 0, windows.get(pk, 0)) or None, ok, at)
            for pk, live_ok, live_failed, ok, at in rows if live_ok or live_failed or ok or pk in windows]
    failed_at = dict(Run.objects.filter(pk__in=[row[3] for row in rows if row[3]]).values_list("pk", "finished_at"))
    LatestOutcome.objects.bulk_create(
        [LatestOutcome(schedule_id=pk, live_success_id=live_ok, live_failure_id=live_failed, failure_id=failed,
                       failure_at=failed_at.get(failed), success_id=ok, success_at=at)
         for pk, live_ok, live_failed, failed, ok, at in rows],
        batch_size=1000)


def run(help_text):
    return models.ForeignKey(blank=True, db_constraint=False, db_index=False, help_text=help_text, null=True,
                             on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='scheduler.run')


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0028_audit_counts'),
    ]

    operations = [
        migrations.CreateModel(
            name='LatestOutcome',
            fields=[
                ('schedule', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='outcome', serialize=False, to='scheduler.schedule')),
                ('live_success', run("The schedule's live SUCCEEDED run with the highest id.")),
                ('live_failure', run("The schedule's live FAILED run with the highest id.")),
                ('failure', run("The schedule's FAILED run with the highest id, backfill windows included.")),
                ('failure_at', models.DateTimeField(blank=True, help_text='When `failure` finished.', null=True)),
                ('success', run("The schedule's SUCCEEDED run that finished last (backfill windows included; the higher id on a tie).")),
                ('success_at', models.DateTimeField(blank=True, help_text='When `success` finished.', null=True)),
            ],
        ),
        migrations.RunPython(seed, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('reason__startswith', 'worker lost')), fields=['queued_at'], name='run_lost_idx'),
        ),
    ]
