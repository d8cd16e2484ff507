"""The history generator of bench/scale.py writes a consistent history that the product's pages render (no timing)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Count
from django.test import Client, override_settings
from django.utils import timezone

from bench import history
from bench.scale_pages import METRICS_TOKEN, PAGE_LABELS, page_urls
from bench.scale_report import compare, table
from scheduler.audit_reads import audit_counts, audit_counts_raw, audit_filtered
from scheduler.models import (
    AuditCount, AuditEntry, Event, GovernanceTick, LatestOutcome, NodeRecord, Run, RunHourCount, RunLogLine,
    RunStatus, Schedule,
)
from scheduler.models.audit import audit_hour
from scheduler.services.history.outcomes import outcomes_stale
from scheduler.services.history.tally import tally_totals
from tests.services.test_hour_counts import keys, ledger_counts, rollup_counts, started

RUNS = 500


@pytest.fixture
def generated(db):
    now = timezone.now()
    with connection.cursor() as cur:
        indexes_before = sorted(history.secondary_indexes(cur))
    info = history.generate_history(runs=RUNS, now=now, progress=lambda line: None, chunk=200)
    return {"now": now, "info": info, "indexes_before": indexes_before}


def _dangling(model) -> dict[str, int]:
    """Foreign keys of `model` that point at no row, per field."""
    out = {}
    for field in model._meta.concrete_fields:
        if field.is_relation:
            parents = field.related_model.objects.values("pk")
            rows = model.objects.filter(**{f"{field.attname}__isnull": False})
            rows = rows.exclude(**{f"{field.attname}__in": parents})
            out[field.name] = rows.count()
    return out


@pytest.mark.django_db
def test_it_writes_every_kind_of_record_with_valid_foreign_keys(generated):
    assert Schedule.objects.filter(name__startswith="hist-").count() == history.SCHEDULES
    assert Run.objects.count() == RUNS + history.LIVE_RUNS
    for model in (Run, NodeRecord, RunLogLine, Event, Schedule):
        assert set(_dangling(model).values()) <= {0}, model
    # the audit log's team is a plain id (never a foreign key): it still names a real team
    teams = set(Schedule.objects.values_list("owner_id", flat=True))
    assert set(AuditEntry.objects.filter(target_type="run").values_list("team_id", flat=True)) <= teams
    with connection.cursor() as cur:  # the dropped indexes are back, the same ones
        assert sorted(history.secondary_indexes(cur)) == generated["indexes_before"]
        if connection.vendor == "sqlite":
            cur.execute("PRAGMA foreign_key_check")
            assert cur.fetchall() == []


@pytest.mark.django_db
def test_it_has_the_shapes_of_a_real_history(generated):
    now = generated["now"]
    statuses = set(Run.objects.values_list("status", flat=True))
    final = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.BLOCKED, RunStatus.CANCELLED}
    assert final <= statuses
    assert Run.objects.filter(status=RunStatus.SUCCEEDED).count() > RUNS * 0.8
    assert {"cron", "interval", "event", "webhook", "manual"} <= set(Run.objects.values_list("trigger_kind", flat=True))
    assert Run.objects.filter(status=RunStatus.FAILED).exclude(error="").exists()
    # over the year before now, in id order, each run's times in order
    past = Run.objects.exclude(trigger_key__startswith="live:")
    oldest, newest = past.order_by("id").first(), past.order_by("-id").first()
    assert now - timedelta(days=366) < oldest.queued_at < now - timedelta(days=364)
    assert now - timedelta(seconds=history.YEAR // RUNS + 3600) < newest.queued_at < now  # one spacing back
    for run in past.filter(started_at__isnull=False)[:50]:
        assert run.queued_at <= run.started_at <= run.finished_at
    # workflow runs have their nodes; event runs their event; some runs a log
    workflow_runs = Run.objects.filter(schedule__target_kind="workflow", started_at__isnull=False)
    assert workflow_runs.exists()
    assert NodeRecord.objects.count() == workflow_runs.count() * len(history.NODES)
    assert not Run.objects.filter(trigger_kind="event", event__isnull=True).exists()
    assert Event.objects.count() == Run.objects.filter(trigger_kind="event").count()
    assert RunLogLine.objects.values("run").distinct().count() >= 1
    assert AuditEntry.objects.filter(action="run.trigger").count() == Run.objects.filter(
        trigger_kind="manual").exclude(status=RunStatus.CANCELLED).count()
    assert GovernanceTick.objects.count() == RUNS // history.TICK_EVERY
    # /metrics' counters of final statuses count the generated runs, as if each had ended on its own
    final = Run.objects.filter(status__in=RunStatus.final()).values_list("status").annotate(n=Count("id"))
    assert {s: n for s, n in tally_totals().items() if n} == dict(final.order_by())
    # ... and the timeline's hour counts, folded (one row per key), equal the ledger's
    assert rollup_counts() == ledger_counts() and started(ledger_counts()) == RUNS
    assert RunHourCount.objects.filter(folded=True).count() == RunHourCount.objects.count() == len(keys(
        ledger_counts()))
    assert any(at != end for _, at, end, _ in ledger_counts()), "runs reaching into the next hour are generated"
    # the audit report's hourly counts count the generated entries, as if each had been written on its own
    counted = {}
    for hour, team_id, actor, action, n in AuditCount.objects.values_list("hour", "team_id", "actor", "action", "n"):
        counted[(hour, team_id, actor, action)] = counted.get((hour, team_id, actor, action), 0) + n
    logged = {}
    for at, team_id, actor, action in AuditEntry.objects.values_list("at", "team_id", "actor", "action"):
        logged[(audit_hour(at), team_id, actor, action)] = logged.get((audit_hour(at), team_id, actor, action), 0) + 1
    assert counted == logged and sum(logged.values()) > RUNS * 0.1
    assert audit_counts({}, now=now) == audit_counts_raw(audit_filtered({}), now=now)
    # the overview's kept latest success and failure of each schedule, as if each run had ended on its own
    assert LatestOutcome.objects.filter(failure__isnull=False).exists()
    assert outcomes_stale() == []
    # the live runs wait for their retry delay: no tick admits them
    assert Run.objects.filter(status=RunStatus.QUEUED, not_before__gt=now).count() == history.LIVE_RUNS


@pytest.mark.django_db
def test_the_measured_pages_render_it(generated):
    client = Client()
    client.force_login(User.objects.get(username=history.ADMIN))
    assert tuple(page_urls()) == PAGE_LABELS  # what --pages may name
    with override_settings(ETL_METRICS_TOKEN=METRICS_TOKEN):
        for label, url in page_urls().items():
            auth = {"HTTP_AUTHORIZATION": f"Bearer {METRICS_TOKEN}"} if url == "/metrics" else {}
            response = client.get(url, **auth)
            assert response.status_code == 200, label
    run = Run.objects.filter(schedule__target_kind="workflow", log_lines__isnull=False).first() or Run.objects.filter(
        schedule__target_kind="workflow").first()
    assert client.get(f"/runs/{run.pk}/").status_code == 200


def _report(db, **values):
    rows = [{"figure": f, "value": v, "unit": u} for f, (v, u) in values.items()]
    return {"db": db, "results": [{"rows": rows}]}


def test_the_table_judges_ratio_size_and_latency_targets():
    small = _report("postgres", **{"overview p95": (20.0, "ms"), "overview HTML": (30.0, "KB"),
                                   "runs list p95": (20.0, "ms"), "dispatch tick p95": (10.0, "ms")})
    large = _report("postgres", **{"overview p95": (23.0, "ms"), "overview HTML": (130.0, "KB"),
                                   "runs list p95": (150.0, "ms"), "dispatch tick p95": (30.0, "ms")})
    rows = {r["figure"]: r for r in compare(small, large)}
    assert rows["overview p95"]["met"] is True and rows["overview p95"]["ratio"] == "1.15x"
    assert rows["overview HTML"]["missed"] == ["> 100 KB"]
    assert rows["runs list p95"]["missed"] == ["ratio > 1.2x", "p95 > 100 ms"]
    assert rows["dispatch tick p95"]["missed"] == ["ratio > 1.2x"]
    assert "MISSED: ratio > 1.2x, p95 > 100 ms" in table(list(rows.values()))


def test_a_ratio_inside_the_small_sizes_spread_is_noise_not_a_miss():
    small = _report("sqlite", **{"runs list p95": (20.0, "ms")})
    small["results"][0]["rows"][0].update({"min": 15.0, "max": 40.0, "n": 3})
    (row,) = compare(small, _report("sqlite", **{"runs list p95": (30.0, "ms")}))
    assert row["met"] is True and row["ratio"] == "1.50x (in spread)"
    (row,) = compare(small, _report("sqlite", **{"runs list p95": (41.0, "ms")}))
    assert row["missed"] == ["ratio > 1.2x"]
