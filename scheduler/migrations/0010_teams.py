"""Teams: the Team model, an owner on every schedule (existing ones land in the default team),
the team of each audit entry, and the permissions of the groups."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

DEFAULT_TEAM = "default"
ADMIN_PERMS = ["act_for_all_teams", "view_team", "add_team", "change_team", "delete_team"]
VIEW_PERMS = ["view_team"]


def default_team_name() -> str:
    return getattr(settings, "ETL_DEFAULT_TEAM", DEFAULT_TEAM) or DEFAULT_TEAM


def assign_default_team(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    Team = apps.get_model("scheduler", "Team")
    Schedule = apps.get_model("scheduler", "Schedule")
    team, _ = Team.objects.get_or_create(name=default_team_name(),
                                         defaults={"description": "Owner of unassigned schedules"})
    Schedule.objects.filter(owner__isnull=True).update(owner=team)

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    perms = {p.codename: p for p in Permission.objects.filter(content_type__app_label="scheduler")}
    for group_name, codenames in [("admin", ADMIN_PERMS), ("operator", VIEW_PERMS), ("viewer", VIEW_PERMS)]:
        group = Group.objects.filter(name=group_name).first()
        if group is not None:
            group.permissions.add(*[perms[c] for c in codenames if c in perms])


def noop(apps, schema_editor):
    pass


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0009_freshness_objectives"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Team",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.SlugField(help_text="Unique id of the team (letters, digits, - and _).", max_length=100, unique=True)),
                ("description", models.CharField(blank=True, help_text="What this team looks after.", max_length=300)),
                ("alert_emails", models.CharField(blank=True, help_text="Comma-separated addresses paged for this team's schedules.", max_length=500)),
                ("alert_webhook_url", models.URLField(blank=True, help_text="Outgoing JSON webhook for this team's alerts.")),
                ("alert_webhook_secret", models.CharField(blank=True, help_text="HMAC secret that signs this team's webhook alerts (generated).", max_length=128)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("members", models.ManyToManyField(blank=True, help_text="Users who act on this team's schedules (their group still decides what they may do).", related_name="etl_teams", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "ordering": ["name"],
                "permissions": [("act_for_all_teams", "Can act on the schedules of every team")],
            },
        ),
        migrations.AddField(
            model_name="schedule",
            name="owner",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name="schedules", to="scheduler.team",
                                    help_text="The team that owns this schedule: its members act on it and hear its alerts."),
        ),
        migrations.AddField(
            model_name="auditentry",
            name="team_id",
            field=models.BigIntegerField(blank=True, db_index=True, help_text="The team that owned the target when this happened.", null=True),
        ),
        migrations.RunPython(assign_default_team, noop),
    ]
