"""The latest `history.prune` entry in one index seek (/metrics' retention gauges, `history_status`).

The prune loop writes one such entry each time it deletes rows, every ETL_PRUNE_INTERVAL (300 s): about 100,000 a
year, and audit entries are never deleted. Read through the `action` index, PostgreSQL fetched and sorted every one
of them on each scrape. A partial index holds those entries alone, so no other audit write pays for it.
"""
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0034_run_queued_notify")]

    operations = [
        migrations.AddIndex(
            model_name="auditentry",
            index=models.Index(condition=models.Q(("action", "history.prune")), fields=["id"],
                               name="audit_prune_idx"),
        ),
    ]
