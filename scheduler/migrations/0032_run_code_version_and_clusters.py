"""Which code a run ran (`Run.code_version`) and the clusters that run (`Cluster`: their code, the targets they
know, a reload request), issue 32.

The column is added by one ALTER TABLE ... ADD COLUMN with a constant default on both databases: Django's own
AddField would rebuild the whole run table on SQLite (a NOT NULL column), minutes at a million runs, and the
default stays in the table (every insert names the column anyway)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0031_connections'),
    ]

    operations = [
        migrations.CreateModel(
            name='Cluster',
            fields=[
                ('holder', models.CharField(help_text='name@host:pid:nonce, as its leases.', max_length=200, primary_key=True, serialize=False)),
                ('name', models.CharField(help_text='Its --name (ETL_CLUSTER_ID).', max_length=100)),
                ('host', models.CharField(max_length=200)),
                ('pid', models.IntegerField()),
                ('started_at', models.DateTimeField()),
                ('seen_at', models.DateTimeField(help_text='Its last beat.')),
                ('code_version', models.CharField(blank=True, help_text='Its packages and one digest over its pipeline modules.', max_length=500)),
                ('code', models.JSONField(blank=True, default=dict, help_text='Packages -> versions, modules -> digests loaded.')),
                ('targets', models.JSONField(blank=True, default=list, help_text="'pipeline:ID' and 'workflow:ID' it knows.")),
                ('problems', models.JSONField(blank=True, default=list, help_text='Packages whose pipelines failed to load.')),
                ('reload_requested_at', models.DateTimeField(blank=True, help_text='Asked to restart its workers (reload_workers, SIGHUP).', null=True)),
                ('reload_reason', models.CharField(blank=True, max_length=300)),
                ('draining_since', models.DateTimeField(blank=True, help_text='Finishing its running runs before it restarts or stops.', null=True)),
            ],
            options={
                'ordering': ['name', 'host', 'pid'],
            },
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(
                "ALTER TABLE scheduler_run ADD COLUMN code_version varchar(200) DEFAULT '' NOT NULL",
                "ALTER TABLE scheduler_run DROP COLUMN code_version",
            )],
            state_operations=[migrations.AddField(
                model_name='run',
                name='code_version',
                field=models.CharField(blank=True, help_text="The code its latest attempt ran: package, version and a digest of the target's source ('sales-etl 0.2.0 · 9f86d081884c'), written as the worker claimed it.", max_length=200),
            ),],
        ),
    ]
