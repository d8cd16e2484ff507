"""Acknowledged failures (the overview's work list), and the groups' new permissions: everyone sees
acknowledgements, operators and admins acknowledge; the admin group manages users and groups in the
Django admin (issue 23, points 2 and 9)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


# group -> (app label, codename) it is given; tests/conftest.py restores the same after a flush
GRANTS = {
    "viewer": [("scheduler", "view_failureack")],
    "operator": [("scheduler", "view_failureack"), ("scheduler", "add_failureack")],
    "admin": [("scheduler", "view_failureack"), ("scheduler", "add_failureack")]
    + [("auth", f"{action}_{model}") for model in ("user", "group") for action in ("view", "add", "change", "delete")],
}


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for group_name, wanted in GRANTS.items():
        group = Group.objects.filter(name=group_name).first()
        if group is None:
            continue
        for app_label, codename in wanted:
            perm = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if perm is not None:
                group.permissions.add(perm)


def noop(apps, schema_editor):
    pass


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0023_backfill_newest_first'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('auth', '0012_alter_user_first_name_max_length'),
    ]

    operations = [
        migrations.CreateModel(
            name='FailureAck',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('up_to_run_id', models.BigIntegerField(help_text='Failures of the schedule up to this run id are acknowledged.')),
                ('actor', models.CharField(help_text='Who acknowledged, as the audit log names them.', max_length=150)),
                ('at', models.DateTimeField(help_text='When.')),
                ('note', models.CharField(help_text='Why the failures are handled (a ticket, a cause, a plan).', max_length=500)),
                ('schedule', models.ForeignKey(help_text='The schedule whose failures are acknowledged.', on_delete=django.db.models.deletion.CASCADE, related_name='failure_acks', to='scheduler.schedule')),
                ('user', models.ForeignKey(blank=True, help_text='Who acknowledged (empty when the user was deleted).', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-at', '-id'],
                'indexes': [models.Index(fields=['schedule', '-up_to_run_id'], name='failureack_schedule_run')],
            },
        ),
        migrations.RunPython(grant, noop),
    ]
