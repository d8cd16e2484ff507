"""Event tokens belong to a team (or are admin-wide, explicitly), and event ids are deduplicated per scope (issue 22).

What existing data becomes: every stored event keeps its id in the admin-wide scope '*', so a repeat of an
old delivery by an admin-wide sender is still a duplicate. Tokens listed in ETL_EVENT_TOKENS are not rows:
they stay valid and are admin-wide, as before (docs/security.md, "Event tokens"); replace them with team
tokens (`manage.py event_token create --team NAME`) and empty the setting.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0018_dbt_target'),
    ]

    operations = [
        migrations.CreateModel(
            name='EventToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='What the token is for (the sending system).', max_length=100)),
                ('all_teams', models.BooleanField(default=False, help_text="Admin-wide: fires every team's schedules (no team).")),
                ('key_id', models.CharField(help_text='Public id of the token; audit entries name it.', max_length=16, unique=True)),
                ('secret_hash', models.CharField(help_text='SHA-256 (hex) of the secret part; the secret is not kept.', max_length=64)),
                ('created_at', models.DateTimeField()),
                ('revoked_at', models.DateTimeField(blank=True, help_text='When it was revoked; a revoked token is refused.', null=True)),
                ('last_used_at', models.DateTimeField(blank=True, help_text='Last event sent with it (to the minute).', null=True)),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='event',
            name='event_unique_id',
        ),
        migrations.AddField(
            model_name='event',
            name='scope',
            field=models.CharField(default='*', help_text="Whose id namespace the event id is in: 'team:<id>' (a team's token or a one-team user), 'teams:<ids>' (a user of several teams) or '*' (admin-wide). Dedup is per scope.", max_length=100),
        ),
        migrations.AddField(
            model_name='event',
            name='team',
            field=models.ForeignKey(blank=True, help_text='The team whose token sent it; empty for admin-wide senders.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='scheduler.team'),
        ),
        migrations.AddConstraint(
            model_name='event',
            constraint=models.UniqueConstraint(fields=('scope', 'topic', 'event_id'), name='event_unique_id_per_scope'),
        ),
        migrations.AddField(
            model_name='eventtoken',
            name='team',
            field=models.ForeignKey(blank=True, help_text='The team whose schedules it may fire.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='event_tokens', to='scheduler.team'),
        ),
        migrations.AddConstraint(
            model_name='eventtoken',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('all_teams', False), ('team__isnull', False)), models.Q(('all_teams', True), ('team__isnull', True)), _connector='OR'), name='event_token_team_or_all_teams'),
        ),
    ]
