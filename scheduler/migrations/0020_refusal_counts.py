"""Refusals counted per actor, permission, object and window, so they cannot flood the audit log (issue 22)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0019_event_tokens_and_team_scope'),
    ]

    operations = [
        migrations.CreateModel(
            name='RefusalCount',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('actor', models.CharField(max_length=150)),
                ('permission', models.CharField(max_length=100)),
                ('target', models.CharField(blank=True, help_text='<type>:<id> of the refused object; empty: none.', max_length=140)),
                ('window_start', models.DateTimeField(help_text='Start of the window the refusals are counted in.')),
                ('count', models.PositiveIntegerField(default=1)),
                ('first_at', models.DateTimeField()),
                ('last_at', models.DateTimeField(db_index=True)),
                ('audit_entry_id', models.BigIntegerField(blank=True, help_text="The window's audit entry.", null=True)),
            ],
            options={
                'ordering': ['-last_at'],
                'constraints': [models.UniqueConstraint(fields=('actor', 'permission', 'target', 'window_start'), name='refusal_count_per_window')],
            },
        ),
    ]
