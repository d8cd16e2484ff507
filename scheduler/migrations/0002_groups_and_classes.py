from django.db import migrations

VIEW = ["view_schedule", "view_run", "view_workloadclass", "view_backfill", "view_backfillwindow", "view_auditentry",
        "view_watermarkstate", "view_watermarkhistory", "view_event", "view_governancetick", "view_alert",
        "view_looplease"]
OPERATE = ["trigger_schedule", "reset_breaker", "manage_watermark", "toggle_schedule", "cancel_run", "manage_backfill"]
CRUD_MODELS = ["schedule", "workloadclass"]


def create_groups(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    perms = {p.codename: p for p in Permission.objects.filter(content_type__app_label="scheduler")}
    viewer, _ = Group.objects.get_or_create(name="viewer")
    viewer.permissions.set([perms[c] for c in VIEW if c in perms])
    operator, _ = Group.objects.get_or_create(name="operator")
    operator.permissions.set([perms[c] for c in VIEW + OPERATE if c in perms])
    admin, _ = Group.objects.get_or_create(name="admin")
    crud = [f"{action}_{model}" for model in CRUD_MODELS for action in ("add", "change", "delete")]
    admin.permissions.set([perms[c] for c in VIEW + OPERATE + crud if c in perms])
    WorkloadClass = apps.get_model("scheduler", "WorkloadClass")
    for name, limit, text in [("standard", 4, "Everyday syncs"), ("heavy", 1, "Large loads, one at a time"),
                              ("critical", 2, "Must-run jobs")]:
        WorkloadClass.objects.get_or_create(name=name, defaults={"concurrency_limit": limit, "description": text})


def noop(apps, schema_editor):
    pass


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length"),
                    ("contenttypes", "0002_remove_content_type_name")]
    operations = [migrations.RunPython(create_groups, noop)]
