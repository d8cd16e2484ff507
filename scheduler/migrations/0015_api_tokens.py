import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("scheduler", "0014_deadline_indexes_and_help_texts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="via",
            field=models.CharField(
                blank=True, max_length=100,
                help_text="The door it came through when not the user's own session, e.g. 'API token k3x9'.",
            ),
        ),
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="What the token is for (a CI job, a script).", max_length=100)),
                ("key_id", models.CharField(help_text="Public id of the token; audit entries name it.", max_length=16,
                                            unique=True)),
                ("secret_hash", models.CharField(
                    help_text="SHA-256 (hex) of the secret part; the secret is not kept.", max_length=64)),
                ("created_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField(
                    blank=True, help_text="After this the token is refused; empty: never.", null=True)),
                ("revoked_at", models.DateTimeField(
                    blank=True, help_text="When it was revoked; a revoked token is refused.", null=True)),
                ("last_used_at", models.DateTimeField(
                    blank=True, help_text="Last request made with it (to the minute).", null=True)),
                ("user", models.ForeignKey(
                    help_text="Whose permissions and teams the token acts with.",
                    on_delete=django.db.models.deletion.CASCADE, related_name="api_tokens",
                    to=settings.AUTH_USER_MODEL)),
            ],
            options={"verbose_name": "API token", "ordering": ["-created_at", "-id"]},
        ),
    ]
