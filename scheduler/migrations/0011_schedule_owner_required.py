"""Every schedule has an owner. A migration of its own: on PostgreSQL the ALTER cannot share a
transaction with 0010's UPDATE of the same table (pending deferred foreign-key triggers)."""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0010_teams")]

    operations = [
        migrations.AlterField(
            model_name="schedule",
            name="owner",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="schedules", to="scheduler.team",
                                    help_text="The team that owns this schedule: its members act on it and hear its alerts."),
        ),
    ]
