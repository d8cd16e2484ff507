"""Migration 0017: the old e-mail and webhook fields become Apprise URLs (and back)."""
from __future__ import annotations

from importlib import import_module

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from scheduler.services.integrations.channels import check_channels

MIGRATION = "scheduler.migrations.0017_apprise_channels"
BEFORE = ("scheduler", "0014_deadline_indexes_and_help_texts")


@pytest.fixture
def migration():
    return import_module(MIGRATION)


def test_the_conversion_of_old_values(migration):
    assert migration.old_to_channels("a@example.com, b@example.com", "https://hooks.example.com/etl?x=1") == (
        "mailto://a@example.com\nmailto://b@example.com\netlhooks://hooks.example.com/etl?x=1")
    assert migration.old_to_channels("", "http://10.0.0.1:8080/hook") == "etlhook://10.0.0.1:8080/hook"
    assert migration.old_to_channels(" , ", "") == ""
    assert migration.channels_to_old("mailto://a@example.com\nslack://T/B/C\netlhooks://h.example/p") == (
        "a@example.com", "https://h.example/p")


def test_every_converted_url_is_one_apprise_accepts(migration, settings):
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True
    text = migration.old_to_channels("ops@example.com,oncall@example.org", "https://hooks.example.com/etl")
    assert check_channels(text, field="alert_channels") == text.splitlines()


@pytest.mark.django_db(transaction=True)
def test_the_migration_converts_existing_rows_and_goes_back(migration):
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes("scheduler")
    target = [("scheduler", "0017_apprise_channels")]
    try:
        executor.migrate([BEFORE])
        old = MigrationExecutor(connection).loader.project_state([BEFORE]).apps
        Team = old.get_model("scheduler", "Team")
        team = Team.objects.create(name="billing", alert_emails="billing@example.com, lead@example.com",
                                   alert_webhook_url="https://hooks.example.com/billing", alert_webhook_secret="s")
        quiet = Team.objects.create(name="quiet")
        WorkloadClass = old.get_model("scheduler", "WorkloadClass")
        wc, _ = WorkloadClass.objects.get_or_create(name="standard", defaults={"concurrency_limit": 4})
        schedule = old.get_model("scheduler", "Schedule").objects.create(
            name="orders", target_id="demo.noop", workload_class=wc, owner_id=team.pk,
            alert_emails="data@example.com", alert_webhook_url="http://hooks.example.com/orders")
        executor = MigrationExecutor(connection)
        executor.migrate(target)
        new = executor.loader.project_state(target).apps
        Team = new.get_model("scheduler", "Team")
        assert Team.objects.get(pk=team.pk).alert_channels == (
            "mailto://billing@example.com\nmailto://lead@example.com\netlhooks://hooks.example.com/billing")
        assert Team.objects.get(pk=team.pk).alert_webhook_secret == "s"
        assert Team.objects.get(pk=quiet.pk).alert_channels == ""
        assert new.get_model("scheduler", "Schedule").objects.get(pk=schedule.pk).alert_channels == (
            "mailto://data@example.com\netlhook://hooks.example.com/orders")
        executor = MigrationExecutor(connection)
        executor.migrate([BEFORE])
        Team = MigrationExecutor(connection).loader.project_state([BEFORE]).apps.get_model("scheduler", "Team")
        back = Team.objects.get(pk=team.pk)
        assert (back.alert_emails, back.alert_webhook_url) == ("billing@example.com, lead@example.com",
                                                               "https://hooks.example.com/billing")
    finally:
        MigrationExecutor(connection).migrate(leaves)
