"""Overlap policy per schedule; `catchup` becomes a policy (latest / all / none).

The boolean `catchup` is carried over: true -> all, false -> latest (what
each meant before). A new column is added, filled, and renamed over the old
one, which works the same on SQLite and PostgreSQL.
"""
from django.db import migrations, models


def forwards(apps, schema_editor):
    Schedule = apps.get_model("scheduler", "Schedule")
    Schedule.objects.filter(catchup=True).update(catchup_policy="all")


def backwards(apps, schema_editor):
    Schedule = apps.get_model("scheduler", "Schedule")
    Schedule.objects.filter(catchup_policy="all").update(catchup=True)


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0002_groups_and_classes")]

    operations = [
        migrations.AddField(
            model_name="schedule",
            name="catchup_policy",
            field=models.CharField(
                choices=[("latest", "Latest: one run for the latest missed fire"),
                         ("all", "All: every missed fire, up to max_catchup"),
                         ("none", "None: missed fires are recorded as SKIPPED, no run")],
                default="latest", max_length=8,
                help_text="Fires missed while the scheduler was down: latest (one run), all (up to max_catchup), none.",
            ),
        ),
        migrations.RunPython(forwards, backwards),
        migrations.RemoveField(model_name="schedule", name="catchup"),
        migrations.RenameField(model_name="schedule", old_name="catchup_policy", new_name="catchup"),
        migrations.AlterField(
            model_name="schedule",
            name="max_catchup",
            field=models.PositiveIntegerField(default=10, help_text="Most missed fires replayed when catchup is 'all'."),
        ),
        migrations.AddField(
            model_name="schedule",
            name="overlap_policy",
            field=models.CharField(
                blank=True, default="", max_length=16,
                choices=[("skip", "Skip: the fire becomes a SKIPPED run"),
                         ("buffer_one", "Buffer one: queue at most one run behind the active one"),
                         ("buffer_all", "Buffer all: queue every fire, run them one at a time"),
                         ("cancel_other", "Cancel other: cancel the active run, start the new one"),
                         ("allow_all", "Allow all: runs overlap freely")],
                help_text="A cron or interval fire while a run is active: skip, buffer_one, buffer_all, cancel_other, "
                          "allow_all. Empty: skip for watermarked schedules, allow_all otherwise.",
            ),
        ),
    ]
